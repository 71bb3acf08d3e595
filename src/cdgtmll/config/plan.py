"""Planning from a validated config: the jobs of each dataset (variants, run specs), the jobs of
each study, and what cannot run here.

The *run spec* of one (dataset, variant, method) job is the part of the config that determines
its result; its sha256 is recorded in the run's provenance and is what Snakemake's params-based
rerun trigger watches, so that a config change re-runs only the affected jobs. It is a
:class:`cdgtmll.config.run_spec.RunSpec`."""

from __future__ import annotations

import json
import math

from cdgtmll.config import yaml12
from cdgtmll.config.run_spec import DATA_KEYS, R_VARIANTS_KEYS, RunSpec
from cdgtmll.config.schema import ConfigError
from cdgtmll.io import canonical_json
from cdgtmll.variants.naming import CLEAN, noise_id, occlusion_id, variant_id

#: figures.pr_curve.highlight default: the methods the paper's PR paragraph compares
#: (Sec. 5, Fig. pr_tail: "+5 pp over MLC-NC, +8 pp over ASL, +14 pp over BCE").
PR_HIGHLIGHT_PAPER = ("CD-GTMLL", "MLC-NC", "ASL", "BCE")


def pr_highlight(config: dict) -> list[str] | None:
    """The methods the PR figure draws in colour (None: all of them)."""
    h = config["figures"].get("pr_curve", {}).get("highlight")
    if h == "all":
        return None
    return list(PR_HIGHLIGHT_PAPER if h is None else h)


def pr_curve_enabled(config: dict) -> bool:
    pr = config["figures"].get("pr_curve", {})
    return bool(config["experiments"].get("r_variants", True) and "dataset" in pr and "severity" in pr
                and pr["dataset"] in config["experiments"]["datasets"]
                and pr["severity"] in config["r_variants"]["severities"].get(pr["dataset"], []))


def variants(config: dict, dataset: str) -> list[str]:
    out = [CLEAN]
    if config["experiments"].get("r_variants", True):
        rv = config["r_variants"]
        for sev in rv["severities"].get(dataset, []):
            out += [variant_id(sev, s) for s in rv["sampling_seeds"]]
    return out


def training_protocol(config: dict, dataset: str) -> dict:
    proto = dict(config["training"]["default"])
    proto.update(config["training"].get(dataset, {}))
    return proto


def split_method(name: str) -> tuple[str, dict]:
    """``'CD-GTMLL@alpha=0.2,n_players=4'`` -> ``('CD-GTMLL', {'alpha': 0.2, 'n_players': 4})``.

    The ``@key=value`` suffix names a variant of a method with some hyper-parameters
    overridden (sensitivity sweeps); values are parsed as YAML scalars."""
    if "@" not in name:
        return name, {}
    base_name, _, spec = name.partition("@")
    over = {}
    for item in spec.split(","):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"method '{name}': expected '<method>@<key>=<value>[,<key>=<value>]'")
        over[key] = yaml12.load(value)  # YAML 1.2 scalars: @lr=1e-3 is a number
    return base_name, over


def resolve_method(config: dict, name: str) -> tuple[str, dict]:
    """(registered method, hyper-parameter overrides) for a method name, an alias from
    ``aliases`` (ablations: No-Curiosity, Single-Predictor, ...) or a ``@key=value`` variant."""
    base_name, over = split_method(name)
    alias = config.get("aliases", {}).get(base_name)
    if alias is not None:
        return alias["method"], {**alias.get("hparams", {}), **over}
    return base_name, over


def method_hparams(config: dict, dataset: str, method: str) -> dict:
    """methods.<registered> <- aliases/@-overrides <- methods.<name> <- dataset_overrides.<dataset>.<name>."""
    registered, over = resolve_method(config, method)
    hp = dict(config["methods"].get(registered, {}))
    hp.update(over)
    if method != registered:
        hp.update(config["methods"].get(method, {}))
    overrides = config.get("dataset_overrides", {}).get(dataset, {})
    hp.update(overrides.get(registered, {}))
    if method != registered:
        hp.update(overrides.get(method, {}))
    return hp


def is_image_dataset(config: dict, dataset: str) -> bool:
    """Whether ``dataset`` trains on images through a ResNet-50 (protocol backbone resnet50)."""
    return training_protocol(config, dataset).get("backbone") == "resnet50"


def finetunes_images(config: dict, dataset: str) -> bool:
    """Whether ``dataset`` trains a ResNet-50 end to end on its images (protocol backbone
    resnet50 and ``image_backbone.mode: finetune``) rather than on frozen features."""
    return is_image_dataset(config, dataset) and config.get("image_backbone", {}).get("mode", "finetune") == "finetune"


def not_runnable(config: dict, dataset: str, method: str) -> str | None:
    """The method's own reason it cannot run on this dataset here (e.g. no pretrained
    encoder, or it needs feature vectors while the dataset is fine-tuned on images)."""
    from cdgtmll.methods import base

    registered, _ = resolve_method(config, method)
    return base.not_runnable(registered, method_hparams(config, dataset, method), finetunes_images(config, dataset))


def gpus_wanted(config: dict) -> bool:
    """Whether a job that trains on ``experiments.device`` asks the scheduler for a GPU:
    ``cuda``, or ``auto`` on a cluster (top-level ``cluster: true``, set by profiles/slurm),
    where the node the job lands on has a GPU only when the job asks for one. ``cpu``, and
    ``auto`` on this machine, ask for none (a local run uses a GPU it has without asking)."""
    device = config["experiments"].get("device", "auto")
    return device == "cuda" or (device == "auto" and bool(config.get("cluster", False)))


#: ``cluster_resources`` defaults (the schema's; docs/cluster.md derives them)
GPU_MIN_CELLS = 500_000
IMAGE_JOB_CPUS = 10


def train_cells(config: dict, dataset: str) -> int | None:
    """Training rows x labels of ``dataset`` as the planner knows them before any data is
    prepared: the dataset registry's published sizes (``n_train``: the official training
    rows, the validation rows included), or ``data.custom.<name>.n_train`` and ``n_labels``.
    None when either is unknown (a custom dataset that gives its labels as an XML file, or no
    ``n_train``). The same for every variant of the dataset (an R variant trains on fewer rows)."""
    from cdgtmll.data.registry import get_spec

    spec = get_spec(dataset, config.get("data", {}).get("custom"))
    if not spec.n_train or not spec.n_labels:
        return None
    return int(spec.n_train) * int(spec.n_labels)


def train_gpus(config: dict, dataset: str, method: str) -> int:
    """GPUs of the training job of ``method`` on ``dataset``: none unless :func:`gpus_wanted`,
    and none for a method that trains no torch model (:attr:`cdgtmll.methods.spec.MethodSpec.neural`:
    linear models and external libraries). A neural method's job asks for one with
    ``experiments.device: cuda``, on an image dataset, on an XMC dataset (registry kind
    ``xmc``), on a dataset whose size :func:`train_cells` does not know, and on any other
    dataset whose training rows x labels reach ``cluster_resources.gpu_min_cells``; below that,
    with device ``auto`` on a cluster, it asks for none, and the job trains on the CPU
    (:func:`cdgtmll.pipeline.env.job_device`)."""
    from cdgtmll.data.registry import get_spec
    from cdgtmll.methods import base

    if not gpus_wanted(config):
        return 0
    registered, _ = resolve_method(config, method)
    if not base.spec_of(registered).neural:
        return 0
    if config["experiments"].get("device", "auto") == "cuda" or is_image_dataset(config, dataset):
        return 1
    if get_spec(dataset, config.get("data", {}).get("custom")).kind == "xmc":
        return 1
    cells = train_cells(config, dataset)
    limit = int(config.get("cluster_resources", {}).get("gpu_min_cells", GPU_MIN_CELLS))
    return 1 if cells is None or cells >= limit else 0


def loader_cpus(config: dict, dataset: str | None, threads: int = 1) -> int:
    """CPUs of a job with ``threads`` threads that decodes images in ``image_backbone.workers``
    DataLoader processes (the job fine-tunes on ``dataset``'s images, or extracts features when
    ``dataset`` is None): ``threads + workers`` for an integer; for ``auto``,
    ``cluster_resources.image_job_cpus`` (at least ``threads``), of which the job runs all but
    one as workers (:func:`cdgtmll.images.trainer_input.resolve_workers`). ``threads`` for a
    job on a dataset it does not fine-tune on images."""
    if dataset is not None and not finetunes_images(config, dataset):
        return threads
    workers = config.get("image_backbone", {}).get("workers", "auto")
    if workers == "auto":
        return max(threads, int(config.get("cluster_resources", {}).get("image_job_cpus", IMAGE_JOB_CPUS)))
    return threads + int(workers)


#: Image fine-tuning throughput the training runtime is sized from: ResNet-50 at 448 px, bf16,
#: one NVIDIA H200, VOC-sized epochs (docs/benchmarks.md, "Image fine-tuning on a GPU").
FINETUNE_IMAGES_PER_S = 952.0
#: Headroom of the estimate: a GPU this many times slower than the H200 (V100 class), or a
#: method this much slower per image than BCE, still finishes inside the limit.
RUNTIME_MARGIN = 3.0
#: Minutes of a training job besides the epochs (Snakemake start-up, loading the images' index,
#: building the model), and the floor of every training job's time limit.
TRAIN_STARTUP_MIN = 15
TRAIN_RUNTIME_MIN = 240


def train_runtime(config: dict, dataset: str, method: str, n_train: int | None, n_test: int | None) -> int:
    """Minutes a training job asks the scheduler for (Snakemake's ``runtime``, sbatch
    ``--time``). A job on a dataset fine-tuned end to end on images (:func:`finetunes_images`)
    gets

        startup + margin * seeds * (epochs * n_train + n_test) * (image_size / 448)^2 / (952 img/s)

    (``n_train``: the training and validation rows, each seen once per epoch; ``n_test``: the
    test rows predicted once per seed; ``epochs``: the method's, else the protocol's), and at
    least :data:`TRAIN_RUNTIME_MIN`; every other job gets :data:`TRAIN_RUNTIME_MIN`. A dataset
    whose sizes are unknown (a custom one without ``n_train``) gets the floor as well."""
    if not finetunes_images(config, dataset) or not n_train:
        return TRAIN_RUNTIME_MIN
    proto = training_protocol(config, dataset)
    epochs = int(method_hparams(config, dataset, method).get("epochs", proto.get("epochs", 1)))
    size = int(config.get("image_backbone", {}).get("image_size", 448))
    seeds = len(fit_seeds(config, method))
    images = seeds * (epochs * n_train + (n_test or 0))
    seconds = RUNTIME_MARGIN * images * (size / 448) ** 2 / FINETUNE_IMAGES_PER_S
    return max(TRAIN_RUNTIME_MIN, TRAIN_STARTUP_MIN + math.ceil(seconds / 60))


def is_deterministic(config: dict, method: str) -> bool:
    """Whether ``method`` (a name, alias or ``@`` variant) declares that its fit and predictions do
    not depend on the seed (``MethodSpec.deterministic``)."""
    from cdgtmll.methods import base

    return base.spec_of(resolve_method(config, method)[0]).deterministic


def fit_seeds(config: dict, method: str) -> list[int]:
    """The seeds a job of ``method`` trains: ``experiments.seeds``, or only the first of them for a
    :func:`is_deterministic` method, whose every seed would write the same bytes: it is fitted
    once and every table, claim and figure reads it as one run (n = 1), not as copies with a std
    of 0. Its run spec records ``seeds: [s0]`` and ``deterministic: true``; a powered run
    (:func:`powered_seeds`) adds no seed to it either."""
    seeds = list(config["experiments"]["seeds"])
    return seeds[:1] if is_deterministic(config, method) else seeds


def _resolved_hparams(config: dict, dataset: str, method: str) -> dict:
    """Every hyper-parameter the job's method uses, code defaults included
    (:func:`cdgtmll.methods.base.resolved_hparams`): a changed default re-runs the job."""
    from cdgtmll.methods import base

    registered, _ = resolve_method(config, method)
    hp = base.resolved_hparams(registered, method_hparams(config, dataset, method), training_protocol(config, dataset))
    return json.loads(canonical_json(hp))


def method_protocol(config: dict, dataset: str, method: str) -> dict:
    """The part of the dataset's training protocol (``training.<dataset>`` over ``training.default``)
    that ``method`` reads: all of it for a method that trains a torch model (``MethodSpec.neural``: the
    shared trainer reads every key, ``ctx.extra['training']``), else only the keys its constructor
    accepts (:func:`cdgtmll.methods.base.build_for_protocol` passes no other; for the built-in
    classical methods, none), so that ``training.<dataset>.epochs`` re-runs no BR-LogReg job."""
    from cdgtmll.methods import base

    registered, _ = resolve_method(config, method)
    proto = training_protocol(config, dataset)
    spec = base.spec_of(registered)
    return proto if spec.neural else spec.from_protocol(proto)


#: ``image_backbone`` keys that say how a job runs, not what it computes: how many processes
#: decode the images (the same bytes for any number: cdgtmll.images.trainer_input, Reproducibility).
#: They stay out of the run spec, so changing them re-runs nothing; the train rules pass them to
#: the job in the environment (cdgtmll.images.trainer_input.WORKERS_ENV).
RUN_ONLY_IMAGE_KEYS = ("workers",)


def run_spec(config: dict, dataset: str, variant: str, method: str) -> RunSpec:
    """Everything that determines the result of one (dataset, variant, method) job, and nothing
    else: ``training`` holds only the protocol keys the method reads (:func:`method_protocol`);
    names for people (display names, notes) are never part of it. Without ``base_run``
    (:func:`base_run`: it depends on the other jobs planned)."""
    return RunSpec(
        dataset=dataset,
        variant=variant,
        method=method,
        registered_method=resolve_method(config, method)[0],
        hparams=method_hparams(config, dataset, method),
        resolved_hparams=_resolved_hparams(config, dataset, method),
        training=method_protocol(config, dataset, method),
        seeds=tuple(fit_seeds(config, method)),
        device=config["experiments"].get("device", "auto"),
        data={k: config["data"][k] for k in DATA_KEYS},
        r_variants={k: config["r_variants"][k] for k in R_VARIANTS_KEYS},
        plugins=tuple(config.get("plugins", [])),
        image_backbone=({k: v for k, v in config.get("image_backbone", {}).items() if k not in RUN_ONLY_IMAGE_KEYS}
                        if is_image_dataset(config, dataset) else None),
        # set only for such a method: every other job's spec (and identity) has no such field
        deterministic=True if is_deterministic(config, method) else None,
    )


SWEEP_PARAMS = {"alpha": "alpha", "players": "n_players"}
#: the readings of the paper the ``readings`` study measures by default, one change each from
#: CD-GTMLL's defaults (cdgtmll.methods.cdgtmll.model; docs/methods.md): a ``key=value`` or, for
#: a reading that changes several keys together, ``key=value,key2=value2``. The last five:
#: best-validation epoch (the project's former default; ``last`` is the paper's protocol), KL
#: (Eq. 6's own example of D), no EMA peers (Algorithm 1 as written), count-based rarity
#: ``1/(1+n_l)``, and one global head without the game (Single-Predictor without curiosity).
DEFAULT_READINGS = ("payoff_scale=sum", "clip_scope=block", "divergence_form=vector", "peer_smoothing=predictions",
                    "tail_rule=cumulative", "payoff_weights=rarity", "player_backbones=separate",
                    "select_epoch=best_val", "divergence=kl", "ema_decay=0.0", "rarity=count",
                    "n_players=1,alpha=0.0")


#: the studies whose runs can be repeated under other readings (``studies.<study>.under``)
UNDER_STUDIES = ("ablation", "alpha", "players", "diagnostics")


def _scalar_text(value) -> str:
    """A reading's value as it is written in a method name (``true``, ``0.1``, ``separate``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def study_under(config: dict, study: str) -> list[str]:
    """The readings a study runs under besides the default, from ``studies.<study>.under`` (one
    mapping or a list of them), each as its ``@`` override text (``player_backbones=separate``;
    several keys of one mapping: one reading, ``key=value,key2=value2`` in the config's order).
    Each key must be a hyper-parameter of every method the study runs, with a value in its
    range, and not one the study sweeps or one a method (an alias) sets itself: else a
    :class:`ConfigError` naming ``studies.<study>.under[<i>].<key>``."""
    spec = config.get("studies", {}).get(study, {})
    under = spec.get("under")
    study_under_datasets(config, study)  # checked here: the config check calls study_methods
    if not under:
        return []
    listed = isinstance(under, list)
    out = []
    for i, reading in enumerate(under if listed else [under]):
        where = f"studies.{study}.under" + (f"[{i}]" if listed else "")
        if not isinstance(reading, dict) or not reading:
            raise ConfigError(f"config error at '{where}': expected a mapping of CD-GTMLL hyper-parameters to "
                              f"values (e.g. {{player_backbones: separate}}), got {reading!r}")
        for key, value in reading.items():
            _check_under_key(config, study, f"{where}.{key}", key, value)
        text = ",".join(f"{k}={_scalar_text(v)}" for k, v in reading.items())
        if text in out:
            raise ConfigError(f"config error at '{where}': the reading '{text}' is listed twice")
        out.append(text)
    return out


def study_under_datasets(config: dict, study: str) -> list[str]:
    """The datasets of a study that run its ``under`` readings too: ``studies.<study>.under_datasets``
    (some of the study's datasets, e.g. the cheaper one of a profile), by default all of them."""
    spec = config.get("studies", {}).get(study, {})
    datasets = study_datasets(spec) if "dataset" in spec else []
    chosen = spec.get("under_datasets")
    if chosen is None:
        return datasets
    for i, d in enumerate(chosen):
        if d not in datasets:
            raise ConfigError(f"config error at 'studies.{study}.under_datasets[{i}]': '{d}' is not one of the "
                              f"study's datasets (studies.{study}.dataset: {', '.join(datasets)})")
    if not spec.get("under"):
        raise ConfigError(f"config error at 'studies.{study}.under_datasets': the study has no 'under' readings")
    return list(chosen)


def _check_under_key(config: dict, study: str, where: str, key: str, value) -> None:
    from cdgtmll.methods import base

    def fail(msg: str):
        raise ConfigError(f"config error at '{where}': {msg}")

    if study in SWEEP_PARAMS and key == SWEEP_PARAMS[study]:
        fail(f"the study '{study}' sweeps '{key}' itself (studies.{study}.values); a reading must change "
             "another hyper-parameter")
    text = _scalar_text(value)
    if (isinstance(value, dict | list) or not text or any(c in text for c in "@=,/ ") or ".." in text
            or yaml12.load(text) != value):
        fail(f"expected a scalar value that reads back as itself in a method name "
             f"('<method>@{key}=<value>'), got {value!r}")
    for m in _study_base_methods(config, study):
        registered, over = resolve_method(config, m)
        if key in over:
            fail(f"the study's method '{m}' sets '{key}' itself ({key}={_scalar_text(over[key])}); "
                 "a reading must change another hyper-parameter")
        declared = base.spec_of(registered).accepted()
        if key not in declared:
            fail(f"'{key}' is not a hyper-parameter of '{registered}' (run by study '{study}' as '{m}'); "
                 f"its hyper-parameters: {', '.join(declared)}")
        try:
            base.check_hparams(registered, {key: value})
        except base.HparamError as exc:
            fail(f"expected {exc.expected} (a hyper-parameter of '{registered}', run by study '{study}' "
                 f"as '{m}'), got {base.format_value(value)}")
        except (TypeError, ValueError) as exc:
            fail(f"'{key}' is not a hyper-parameter of '{registered}' (run by study '{study}' as '{m}'): "
                 f"{str(exc).split(': ', 1)[-1]}")


def with_reading(method: str, reading: str) -> str:
    """A study method under a reading: ``CD-GTMLL`` -> ``CD-GTMLL@player_backbones=separate``,
    ``CD-GTMLL@n_players=3`` -> ``CD-GTMLL@n_players=3,player_backbones=separate``,
    ``No-Curiosity`` -> ``No-Curiosity@player_backbones=separate`` (the reading comes last; the
    figures split it off again: :func:`cdgtmll.figures.studies.runs.split_reading`)."""
    return f"{method}{',' if '@' in method else '@'}{reading}" if reading else method


def _study_base_methods(config: dict, study: str) -> list[str]:
    """Methods a study runs under the default reading; sweeps expand to ``<method>@<param>=<value>``."""
    spec = config.get("studies", {}).get(study, {})
    if study == "diagnostics":
        return [spec.get("method", "CD-GTMLL")]
    if study == "readings":
        base_method = spec.get("method", "CD-GTMLL")
        ref = [spec["reference"]] if spec.get("reference") else []
        return [base_method, *(f"{base_method}@{r}" for r in spec.get("readings", DEFAULT_READINGS)), *ref]
    if study in SWEEP_PARAMS:
        base_method = spec.get("method", "CD-GTMLL")
        return [f"{base_method}@{SWEEP_PARAMS[study]}={v}" for v in spec.get("values", [])]
    return list(spec.get("methods", []))


def study_methods(config: dict, study: str) -> list[str]:
    """Methods a study runs; sweeps expand to ``<method>@<param>=<value>``. A study with
    ``under`` (:func:`study_under`) runs them under the default reading, then each of them under
    each listed reading (:func:`with_reading`), in the order listed."""
    ms = _study_base_methods(config, study)
    return ms + [with_reading(m, r) for r in study_under(config, study) for m in ms]


def study_datasets(spec: dict) -> list[str]:
    """The datasets a study runs on: its ``dataset``, one name or a list of names."""
    d = spec["dataset"]
    return [d] if isinstance(d, str) else list(d)


def study_jobs(config: dict) -> dict[str, list[tuple[str, str, str]]]:
    """(dataset, variant, method) jobs of each configured study, dataset by dataset."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for study, spec in config.get("studies", {}).items():
        out[study] = [job for d in study_datasets(spec) for job in _study_jobs_on(config, study, spec, d)]
    return out


def _study_jobs_on(config: dict, study: str, spec: dict, d: str) -> list[tuple[str, str, str]]:
    """(dataset, variant, method) jobs of one study on one dataset (its ``under`` readings only on
    :func:`study_under_datasets`)."""
    ms = study_methods(config, study) if d in study_under_datasets(config, study) else _study_base_methods(config, study)
    if study == "noise":
        vs = [CLEAN] + [noise_id(r, s) for r in spec["rates"] for s in spec.get("sampling_seeds", [0])]
    elif study == "occlusion":
        # occluded training images exist only for image datasets; on tabular data only
        # the clean runs are made and the figure states that occlusion does not apply
        vs = [CLEAN]
        if is_image_dataset(config, d):
            vs += [occlusion_id(g, s) for g in spec["levels"] for s in spec.get("sampling_seeds", [0])]
    else:
        vs = [spec.get("variant", CLEAN)]
    return [(d, v, m) for v in vs for m in ms]


#: run-spec fields that name a job without determining its result: the name a setting has in
#: a table or figure (``CD-GTMLL@alpha=0.4``, ``No-Curiosity``). Everything else of the spec
#: (registered method, configured and resolved hyper-parameters, data, protocol, seeds) decides it.
NAME_FIELDS = ("method",)


def result_key(spec: RunSpec) -> str:
    """What determines a job's result: its run spec without :data:`NAME_FIELDS`, as canonical
    JSON. Two jobs with the same key train the same models and write byte-identical predictions."""
    return canonical_json({k: v for k, v in spec.to_dict().items() if k not in NAME_FIELDS})


def shared_runs(jobs, spec_of, own=()) -> dict[tuple[str, str, str], tuple[str, str, str]]:
    """Each (dataset, variant, method) job -> the job whose run folder holds its result: the
    first job in ``jobs`` with the same :func:`result_key` (itself when it is the first).
    ``spec_of(dataset, variant, method)`` gives a job's run spec. A sweep point or an ablation
    that is another job's setting (``CD-GTMLL@alpha=0.4`` with CD-GTMLL's default alpha 0.4;
    ``CD-GTMLL@alpha=0.0`` and ``No-Curiosity``) is trained once, under the first name.
    Jobs in ``own`` (the tables' rows) keep a run folder of their own, named as they are,
    and later jobs may share it."""
    own = set(own)
    first: dict[str, tuple[str, str, str]] = {}
    out = {}
    for job in jobs:
        key = result_key(spec_of(*job))
        out[job] = job if job in own else first.get(key, job)
        first.setdefault(key, job)
    return out


def aliases(run_of: dict) -> dict[tuple[str, str, str], tuple[str, str, str]]:
    """The jobs of :func:`shared_runs` that name another job's run: {setting: run}."""
    return {job: run for job, run in run_of.items() if job != run}


# --------------------------------------------------------------------------- seeds with power

def _power(config: dict) -> dict:
    return config.get("power") or {}


def extra_seeds(config: dict) -> list[int]:
    """The seeds a powered run trains besides ``experiments.seeds``: ``power.seeds`` less those,
    in the order written (none without a ``power`` section, or when it lists no other seed)."""
    base = set(config["experiments"]["seeds"])
    return [int(s) for s in dict.fromkeys(_power(config).get("seeds", [])) if s not in base]


def powered_seeds(config: dict) -> list[int]:
    """Every seed of a powered run: ``experiments.seeds``, then :func:`extra_seeds`."""
    return [*config["experiments"]["seeds"], *extra_seeds(config)]


def with_seeds(config: dict, seeds) -> dict:
    """``config`` with ``experiments.seeds`` replaced (a shallow copy; the input is left as it is):
    the config of the jobs that train a powered run's extra seeds, whose run spec, runtime and
    code are those of the base job but for its ``seeds``."""
    return {**config, "experiments": {**config["experiments"], "seeds": list(seeds)}}


def powered_settings(config: dict, main_jobs, study_jobs: dict) -> list[tuple[str, str, str]]:
    """The (dataset, variant, method) settings whose comparisons need more seeds: every table row
    (``main_jobs``) of a method in ``power.methods``, on every dataset and variant the tables run,
    and every setting of each study in ``power.studies`` (``study_jobs``: :func:`study_jobs`) under
    the paper as written: the settings a study adds under its ``under`` readings keep
    ``experiments.seeds`` (they show whether a reading lets N or a term act at all, and cost up to
    N backbones a fit). None when there are no :func:`extra_seeds`."""
    if not extra_seeds(config):
        return []
    p = _power(config)
    methods = set(p.get("methods", []))
    out = [j for j in main_jobs if j[2] in methods]
    for study in p.get("studies", []):
        as_written = set(_study_base_methods(config, study))
        out += [j for j in study_jobs.get(study, []) if j[2] in as_written]
    return list(dict.fromkeys(out))


def powered_runs(config: dict, run_of: dict, main_jobs, study_jobs: dict) -> set[tuple[str, str, str]]:
    """The run folders (``run_of``: :func:`shared_runs`) that train :func:`powered_seeds`: those
    of the :func:`powered_settings` (a folder is powered when any setting read from it is).
    Settings not in ``run_of`` (not run here) are left out."""
    return {run_of[j] for j in powered_settings(config, main_jobs, study_jobs) if j in run_of}



# --------------------------------------------------------------------------- runs built on another run

#: run-spec fields a base run must share with the run built on it (besides the trainer's
#: hyper-parameters): what its first stage trains on and how
STAGE1_FIELDS = ("dataset", "variant", "training", "device", "data", "r_variants", "plugins", "image_backbone")


def base_method(config: dict, method: str) -> str | None:
    """The registered method whose trained model ``method``'s first stage is
    (:attr:`cdgtmll.methods.spec.MethodSpec.builds_on`: PE, ETU, LSFA -> BCE), or None."""
    from cdgtmll.methods import base

    return base.spec_of(resolve_method(config, method)[0]).builds_on


def base_job(config: dict, jobs, dataset: str, variant: str, method: str, own=()) -> tuple[str, str, str] | None:
    """The (dataset, variant, method) job whose run folder holds the base method's run for
    ``method`` on ``dataset``/``variant``: the job named as the base method when it is planned
    (``jobs``: the jobs that run here), itself when it is in ``own`` (a table row keeps its own
    folder), else the first job of the same registered method with the same result (the folder
    :func:`shared_runs` gives it); None when ``method`` builds on nothing or its base is not planned."""
    b = base_method(config, method)
    if b is None or (dataset, variant, b) not in jobs:
        return None
    target = (dataset, variant, b)
    if target in set(own):
        return target
    key = result_key(run_spec(config, *target))
    for j in jobs:
        if j[:2] == target[:2] and resolve_method(config, j[2])[0] == resolve_method(config, b)[0] \
                and result_key(run_spec(config, *j)) == key:
            return j
    return target


def _accepted(name: str) -> set[str]:
    from cdgtmll.methods import base

    return set(base.spec_of(name).accepted())


def base_run(config: dict, spec: RunSpec, base: tuple[str, str, str] | None, base_seeds) -> dict:
    """The ``base_run`` entry of the run spec ``spec`` of a method that builds on another
    (:func:`base_method`): ``{method, dir, spec_sha256}`` of the base run when ``base`` (its job:
    :func:`base_job`) trains the model ``spec``'s first stage would train, i.e. the same
    :data:`STAGE1_FIELDS`, the base method's resolved hyper-parameters equal to those it gets
    from ``spec``'s trainer hyper-parameters (the keys both methods accept), and ``base_seeds``
    (the seeds its run folder trains) holding every seed of ``spec``. Otherwise
    ``{method, dir: None, reason}``: the run fits its first stage itself, and says why."""
    from cdgtmll.methods import base as methods

    b = base_method(config, spec.method)
    where = f"{spec.dataset}/{spec.variant}"

    def own(reason: str) -> dict:
        return {"method": b, "dir": None, "reason": reason}

    if base is None:
        return own(f"{b} is not run on {where} in this configuration")
    bspec = run_spec(config, *base)
    differ = [k for k in STAGE1_FIELDS if canonical_json(getattr(spec, k)) != canonical_json(getattr(bspec, k))]
    if differ:
        return own(f"{b}'s run on {where} differs in {', '.join(differ)}")
    registered = resolve_method(config, spec.method)[0]
    shared = _accepted(b) & _accepted(registered)
    mine = {k: v for k, v in (spec.resolved_hparams or {}).items() if k in shared}
    want = json.loads(canonical_json(methods.resolved_hparams(b, mine, training_protocol(config, spec.dataset))))
    have = bspec.resolved_hparams or {}
    diff = sorted(k for k in set(want) | set(have) if canonical_json(want.get(k)) != canonical_json(have.get(k)))
    if diff:
        return own(f"{b}'s run on {where} has other hyper-parameters ("
                   + ", ".join(f"{k}: {have.get(k)!r} there, {want.get(k)!r} here" for k in diff) + ")")
    missing = [s for s in spec.seeds if s not in set(base_seeds)]
    if missing:
        return own(f"{b}'s run on {where} does not train seed(s) {', '.join(map(str, missing))}")
    return {"method": b, "dir": "results/runs/{}/{}/{}".format(*base), "spec_sha256": bspec.sha256()}
