"""Fixtures of the pipeline tests."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.image_datasets import make_voc_devkit
from tests.support.mirror import mirror_file


@pytest.fixture(scope="module")
def voc_mirror(tmp_path_factory, mirror):
    voc_main = mirror_file(mirror, "voc2007/ImageSets/Main")
    img_mirror = tmp_path_factory.mktemp("voc") / "mirror"
    # all 9,963 images, each a different random JPEG: identical images make every BatchNorm
    # batch variance ~0, and a randomly initialised ResNet-50's first gradient then overflows
    # (training rightly stops as diverged)
    ids = make_voc_devkit(img_mirror / "voc2007", voc_main, rng=np.random.default_rng(0))
    assert len(ids["trainval"]) == 5011 and len(ids["test"]) == 4952
    return img_mirror
