"""Helpers the tests call (plain functions and constants, no pytest fixtures: those live in
the ``conftest.py`` files).

``tests`` and every folder below it are packages, and pytest's default ``prepend`` import
mode puts the repository root (the first folder above ``tests/`` without an ``__init__.py``)
first on ``sys.path``, so tests import these modules by their full name::

    from tests.support.mirror import yeast_arrays
    from tests.support.paths import ROOT

The repository root comes before site-packages, so this ``tests`` package wins over the
unrelated top-level ``tests`` package that iterative-stratification installs. A child process
started by a test imports the helpers the same way after ``sys.path.insert(0, str(ROOT))``.

* :mod:`tests.support.paths`: ``ROOT`` (the checkout) and ``SHARED`` (``../shared`` beside it);
* :mod:`tests.support.mirror`: the dataset mirror and Yeast (rebuilt from river's packaged copy
  when there is no mirror);
* :mod:`tests.support.workflow`: Snakemake in a subprocess (environment, copy of the checkout);
* :mod:`tests.support.dvc_repo`: DVC test repositories, and the quick profile's finished run
  shared by a test session (``quick_run``, tests/integration/conftest.py);
* :mod:`tests.support.fixed_git`: the repository state the fast tests see (no git process);
* :mod:`tests.support.external_envs`: the external XMC libraries' environments;
* :mod:`tests.support.image_datasets`: VOC / COCO files in the official layouts, tiny JPEGs;
* :mod:`tests.support.finetune`: the toy image dataset of the fine-tuning tests;
* :mod:`tests.support.losses`: label counts and batches of the loss tests;
* :mod:`tests.support.official_refs`: baselines' official functions ported verbatim, and the
  generator of their reference values (``tests/fixtures/official``);
* :mod:`tests.support.study_runs`: synthetic run folders in the pipeline's layout (figures);
* :mod:`tests.support.lock`: requirements.lock parsed per platform;
* :mod:`tests.support.tools`: the command-line tools in ``tools/``, loaded from their files.
"""
