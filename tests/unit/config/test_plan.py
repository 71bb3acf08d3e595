"""What a job asks a cluster for (cdgtmll.config.plan): GPUs per method, device and dataset size,
CPUs of a job that decodes images, and the time limit of image fine-tuning from its size, epochs
and seeds, on the shipped paper config."""

import copy

import pytest

from cdgtmll.config import loader, plan
from cdgtmll.config.schema import ConfigError
from cdgtmll.data.registry import get_spec
from cdgtmll.methods import base
from tests.support.paths import ROOT

# methods of the paper config that train no torch model (linear models, external libraries)
CLASSICAL = {"BR-LogReg", "XR-Linear", "XR-Transformer", "MatchXML", "napkinXC-PLT", "LibMultiLabel-1vsRest"}


@pytest.fixture(scope="module")
def paper():
    return loader.load(ROOT / "config/paper.yaml")


def _with(cfg, device, cluster=None):
    cfg = copy.deepcopy(cfg)
    cfg["experiments"]["device"] = device
    if cluster is not None:
        cfg["cluster"] = cluster
    return cfg


def _gpus(cfg, dataset="mediamill"):
    return {m: plan.train_gpus(cfg, dataset, m) for m in cfg["experiments"]["methods"]}


def test_paper_methods_split_into_neural_and_classical(paper):
    methods = {plan.resolve_method(paper, m)[0] for m in paper["experiments"]["methods"]}
    assert methods & CLASSICAL and methods - CLASSICAL
    for m in methods:
        assert base.spec_of(m).neural is (m not in CLASSICAL), m


@pytest.mark.parametrize("device,cluster,neural", [
    ("auto", None, 0),   # a local run (the shipped configs): asks for nothing, as before
    ("auto", False, 0),
    ("auto", True, 1),   # profiles/slurm: config: [cluster=True]
    ("cuda", None, 1),
    ("cuda", True, 1),
    ("cpu", True, 0),    # a CPU-only cluster
])
def test_train_gpus_one_for_neural_methods_only(paper, device, cluster, neural):
    got = _gpus(_with(paper, device, cluster))
    assert {m: n for m, n in got.items() if m in CLASSICAL} == {m: 0 for m in got if m in CLASSICAL}
    assert {m: n for m, n in got.items() if m not in CLASSICAL} == {m: neural for m in got if m not in CLASSICAL}
    assert plan.gpus_wanted(_with(paper, device, cluster)) is bool(neural)


def test_tabular_jobs_ask_for_a_gpu_from_gpu_min_cells_and_images_and_xmc_always(paper):
    """Device auto on a cluster: a neural job on a tabular dataset asks for a GPU only from
    cluster_resources.gpu_min_cells training rows x labels (the registry's published sizes);
    image and XMC datasets always ask, and so does every neural job with device cuda."""
    cluster = _with(paper, "auto", True)
    assert plan.train_cells(paper, "yeast") == 1500 * 14 and plan.train_cells(paper, "mediamill") == 30993 * 101
    limit = cluster["cluster_resources"]["gpu_min_cells"]
    assert plan.train_cells(paper, "yeast") < limit <= plan.train_cells(paper, "mediamill")
    got = {d: _gpus(cluster, d) for d in cluster["experiments"]["datasets"]}
    neural = [m for m in cluster["experiments"]["methods"] if m not in CLASSICAL]
    for d, per_method in got.items():
        want = 0 if d == "yeast" else 1
        assert {m: per_method[m] for m in neural} == {m: want for m in neural}, d
        assert all(per_method[m] == 0 for m in per_method if m in CLASSICAL), d
    # the threshold is the config's: at Yeast's own size Yeast asks, one cell above it does not
    at = copy.deepcopy(cluster)
    at["cluster_resources"]["gpu_min_cells"] = 21000
    assert plan.train_gpus(at, "yeast", "BCE") == 1
    at["cluster_resources"]["gpu_min_cells"] = 21001
    assert plan.train_gpus(at, "yeast", "BCE") == 0
    # XMC and images ask whatever their size; device cuda asks below the threshold
    at["cluster_resources"]["gpu_min_cells"] = 10**12
    assert plan.train_gpus(at, "eurlex-4k", "BCE") == 1 and plan.train_gpus(at, "voc2007", "BCE") == 1
    assert plan.train_gpus(_with(paper, "cuda"), "yeast", "BCE") == 1


def test_a_custom_dataset_of_unknown_size_asks_for_a_gpu(paper):
    """A custom dataset's size is what data.custom gives (n_train, n_labels); without both, its
    neural jobs ask for a GPU (a large job never lands on a CPU-only node)."""
    cfg = _with(paper, "auto", True)
    base = {"format": "mulan-arff", "train": "t-train.arff", "test": "t-test.arff"}
    cfg["data"]["custom"] = {"small": {**base, "n_labels": 5, "n_train": 100},
                             "no_rows": {**base, "n_labels": 5},
                             "xml_labels": {**base, "xml": "t.xml", "n_train": 100}}
    assert plan.train_cells(cfg, "small") == 500 and plan.train_gpus(cfg, "small", "BCE") == 0
    for name in ("no_rows", "xml_labels"):
        assert plan.train_cells(cfg, name) is None and plan.train_gpus(cfg, name, "BCE") == 1, name


def test_image_jobs_ask_for_the_cpus_that_feed_the_gpu(paper):
    """image_backbone.workers auto: a job that decodes images asks for
    cluster_resources.image_job_cpus (the paper's 10); an integer asks 1 + workers; a tabular
    job keeps its threads."""
    assert paper["image_backbone"]["workers"] == "auto" and paper["cluster_resources"]["image_job_cpus"] == 10
    assert plan.loader_cpus(paper, "voc2007") == plan.loader_cpus(paper, None) == 10
    assert plan.loader_cpus(paper, "yeast") == 1 and plan.loader_cpus(paper, "yeast", 2) == 2
    fixed = copy.deepcopy(paper)
    fixed["image_backbone"]["workers"] = 3
    assert plan.loader_cpus(fixed, "coco2014") == 4 and plan.loader_cpus(fixed, None, 2) == 5
    frozen = copy.deepcopy(paper)
    frozen["image_backbone"]["mode"] = "frozen"
    assert plan.loader_cpus(frozen, "voc2007") == 1 and plan.loader_cpus(frozen, None) == 10
    bad = copy.deepcopy(paper)
    bad["image_backbone"]["workers"] = "many"
    with pytest.raises(ConfigError, match="workers"):
        loader.validate(bad, source="x.yaml")


def test_cluster_key_is_validated_and_defaults_to_false(paper):
    assert paper["cluster"] is False
    bad = copy.deepcopy(paper)
    bad["cluster"] = "true"  # what --config cluster=true gives (Snakemake reads True/False only)
    with pytest.raises(ConfigError, match="cluster"):
        loader.validate(bad, source="x.yaml")


def test_train_runtime_of_image_finetuning_follows_size_epochs_and_seeds(paper):
    """COCO (82k images, 40 epochs, 3 seeds at 448 px) gets more than the 4 h floor, enough for
    a GPU RUNTIME_MARGIN times slower than the measured throughput; twice the epochs about
    doubles the fine-tuning part; tabular and XMC jobs keep the floor."""
    coco = get_spec("coco2014")
    runtime = plan.train_runtime(paper, "coco2014", "BCE", coco.n_train, coco.n_test)
    epochs = paper["training"]["coco2014"]["epochs"]
    seeds = len(paper["experiments"]["seeds"])
    images = seeds * (epochs * coco.n_train + coco.n_test)
    assert runtime > plan.TRAIN_RUNTIME_MIN
    assert runtime * 60 >= plan.RUNTIME_MARGIN * images / plan.FINETUNE_IMAGES_PER_S
    longer = copy.deepcopy(paper)
    longer["training"]["coco2014"]["epochs"] = 2 * epochs
    part = runtime - plan.TRAIN_STARTUP_MIN
    assert 1.9 * part <= plan.train_runtime(longer, "coco2014", "BCE", coco.n_train, coco.n_test) - plan.TRAIN_STARTUP_MIN
    one_seed = copy.deepcopy(paper)
    one_seed["experiments"]["seeds"] = [0]
    assert plan.train_runtime(one_seed, "coco2014", "BCE", coco.n_train, coco.n_test) < runtime
    small = copy.deepcopy(paper)
    small["image_backbone"]["image_size"] = 224  # a quarter of the pixels
    assert plan.train_runtime(small, "coco2014", "BCE", coco.n_train, coco.n_test) < runtime
    for ds in ("yeast", "amazoncat-13k"):
        spec = get_spec(ds)
        assert plan.train_runtime(paper, ds, "BCE", spec.n_train, spec.n_test) == plan.TRAIN_RUNTIME_MIN
    assert plan.train_runtime(paper, "coco2014", "BCE", None, None) == plan.TRAIN_RUNTIME_MIN


def test_image_workers_are_not_part_of_the_run_spec():
    """How many processes decode the images changes no result (tests/unit/images/test_finetune.py,
    test_workers_do_not_change_a_run): changing image_backbone.workers leaves every image job's run
    spec (its --spec bytes and hash) as it was, so it re-runs nothing; the other image_backbone keys
    are in it."""
    paper = loader.load(ROOT / "config/paper.yaml")
    fixed = copy.deepcopy(paper)
    fixed["image_backbone"]["workers"] = 7
    jobs = [(d, m) for d in ("voc2007", "coco2014") for m in paper["experiments"]["methods"]
            if plan.is_image_dataset(paper, d)]
    assert jobs
    for d, m in jobs:
        a, b = plan.run_spec(paper, d, "clean", m), plan.run_spec(fixed, d, "clean", m)
        assert a.to_json() == b.to_json() and "workers" not in a.image_backbone
        assert a.image_backbone["image_size"] == paper["image_backbone"]["image_size"]
