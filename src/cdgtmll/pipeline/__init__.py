"""The pipeline's run-time support, what the Snakemake workflow (``Snakefile``, ``workflow/``)
runs in its own process: the environment its jobs inherit (:mod:`cdgtmll.pipeline.env`), the
job records DVC carries (:mod:`cdgtmll.pipeline.records`), the results folder's profile marker
(:mod:`cdgtmll.pipeline.profile_guard`), the report's landing page
(:mod:`cdgtmll.pipeline.landing`), the job log (:mod:`cdgtmll.pipeline.joblog`) and the progress
line of the logger plugin (:mod:`cdgtmll.pipeline.eta`). Workarounds for its dependencies live
in :mod:`cdgtmll.runtime`."""
