"""What a job asks a cluster for (cdgtmll.config.plan): GPUs per method and device, and the
time limit of image fine-tuning from its size, epochs and seeds, on the shipped paper config."""

import copy

import pytest

from cdgtmll.config import loader, plan
from cdgtmll.config.schema import ConfigError
from cdgtmll.data.registry import get_spec
from cdgtmll.methods import catalog
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


def _gpus(cfg):
    return {m: plan.train_gpus(cfg, "yeast", m) for m in cfg["experiments"]["methods"]}


def test_paper_methods_split_into_neural_and_classical(paper):
    methods = {plan.resolve_method(paper, m)[0] for m in paper["experiments"]["methods"]}
    assert methods & CLASSICAL and methods - CLASSICAL
    for m in methods:
        assert catalog.is_neural(m) is (m not in CLASSICAL), m


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
