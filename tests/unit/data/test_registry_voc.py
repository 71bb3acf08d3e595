"""The VOC2007 entry of the dataset registry (cdgtmll.data.registry) and the class list of the
VOC reader (cdgtmll.data.voc): one list of the 20 classes, read by both."""

from __future__ import annotations

from cdgtmll.data import registry, voc
from tests.support.mirror import mirror_file, mirror_path


def test_registry_and_reader_share_one_class_list():
    # the registry names its per-class label files from the reader's list, not from a copy
    assert registry.VOC_CLASSES is voc.VOC_CLASSES
    labels = [f for f in registry.voc_files() if f.role.startswith("labels-")]
    for split in ("trainval", "test"):
        names = [f.name.rpartition("/")[2] for f in labels if f.role == f"labels-{split}"]
        assert names == [f"{split}.txt"] + [f"{c}_{split}.txt" for c in voc.VOC_CLASSES]


def test_the_mirrors_label_files_are_the_registrys_and_read_in_class_order():
    main = mirror_file(mirror_path(), "voc2007/ImageSets/Main")
    want = {f.name.rpartition("/")[2] for f in registry.voc_files() if f.role.startswith("labels-")}
    assert {p.name for p in main.iterdir()} == want and len(want) == 42
    ids, Y, _ = voc.read_voc_labels(main, "test")
    assert Y.shape == (4952, 20)
    # column j is the class VOC_CLASSES[j]: its own file's positives
    j = voc.VOC_CLASSES.index("sheep")
    flags = dict(line.split() for line in (main / "sheep_test.txt").read_text().split("\n") if line.strip())
    assert [i for i, y in zip(ids, Y[:, j]) if y] == [i for i in ids if flags[i] == "1"]
