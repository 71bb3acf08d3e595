"""Dataset registry: one :class:`DatasetSpec` per dataset the paper (Sec. 5.1) uses, plus
the MULAN sets the offline mirror holds, plus datasets defined in the config.

Each spec lists the raw files (:class:`RemoteFile`) with their official download URLs
(official first) and sha256. A ``sha256`` of ``None`` means *unknown*: the upstream does
not publish one and it could not be measured offline; acquisition then records the hash
it saw and warns, and never reports the file as verified.

Hashes of the MULAN ARFF/XML files are the content hashes of ``tsoumakas/mulan`` at
commit ``43f6389`` (``data/multi-label/<set>/``), so they apply to the raw GitHub URLs
pinned to that commit. Hashes of the VOC2007 ``ImageSets/Main`` label files are those of
the copy in ``varun-nagaraja/BING-Objectness@2a16654`` (the same files are inside the
official ``VOCtrainval_06-Nov-2007.tar`` / ``VOCtest_06-Nov-2007.tar``).

MULAN format (Tsoumakas et al., "MULAN: A Java Library for Multi-Label Learning",
JMLR 12, 2011): an ARFF file per split with the labels as ``{0,1}`` attributes, and an
XML file naming which attributes are labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdgtmll.data.voc import VOC_CLASSES

MULAN_COMMIT = "43f6389"
MULAN_RAW = f"https://raw.githubusercontent.com/tsoumakas/mulan/{MULAN_COMMIT}/data/multi-label"
MULAN_SOURCEFORGE = "https://sourceforge.net/projects/mulan/files/datasets"
XMC_PAGE = "http://manikvarma.org/downloads/XC/XMLRepository.html"
BING_RAW = "https://raw.githubusercontent.com/varun-nagaraja/BING-Objectness/2a16654/VOC2007/ImageSets/Main"

KINDS = ("tabular", "image", "xmc")
FORMATS = ("mulan-arff", "voc-devkit", "coco-json", "xmc-bow")
MULAN_LOADER = "cdgtmll.data.mulan.load_spec"


@dataclass(frozen=True)
class RemoteFile:
    """One raw file of a dataset.

    ``name`` is the path inside the dataset folder (``<mirror>/<folder>/<name>`` and
    ``<raw>/<dataset>/<name>``). ``urls``: official first; empty when the file has no
    direct download (then ``manual`` says how to get it). ``sha256``/``size`` ``None`` =
    unknown. ``role`` tells the loader what the file is (``train``, ``test``, ``labels``).
    """

    name: str
    urls: tuple[str, ...] = ()
    sha256: str | None = None
    size: int | None = None
    role: str = ""
    manual: str | None = None


@dataclass(frozen=True)
class PackagedCopy:
    """A copy of a dataset shipped inside an installed Python distribution.

    It is a *different file* than the raw ones (its own format and sha256); ``replaces``
    names the raw files it stands in for, ``format`` tells the loader how to read it.
    """

    distribution: str
    version: str
    path: str  # inside the distribution, for importlib.metadata's locate_file
    sha256: str
    size: int
    format: str
    replaces: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """File name used in the raw folder."""
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    display_name: str
    kind: str
    format: str
    n_labels: int | None
    files: tuple[RemoteFile, ...]
    n_train: int | None
    n_test: int | None
    loader: str | None  # dotted path ``module.function``; None = loader not implemented yet
    packaged: tuple[PackagedCopy, ...] = ()
    notes: str = ""
    n_features: int | None = None
    mirror_folder: str | None = None  # folder in the mirror, when it differs from ``name``

    @property
    def folder(self) -> str:
        return self.mirror_folder or self.name

    def file(self, key: str) -> RemoteFile:
        """The file with this name or role."""
        for f in self.files:
            if f.name == key or f.role == key:
                return f
        raise KeyError(f"dataset '{self.name}' has no file or role '{key}' "
                       f"(files: {', '.join(f.name for f in self.files)})")


# --------------------------------------------------------------------------- MULAN
def _mulan(
    name: str,
    display: str,
    folder: str,
    stem: str,
    hashes: dict[str, tuple[str, int]],
    n_labels: int,
    n_train: int,
    n_test: int,
    n_features: int,
    rar: str,
    notes: str = "",
    packaged: tuple[PackagedCopy, ...] = (),
) -> DatasetSpec:
    files = []
    for role, fname in (("train", f"{stem}-train.arff"), ("test", f"{stem}-test.arff"), ("labels", f"{stem}.xml")):
        sha, size = hashes[fname]
        files.append(
            RemoteFile(
                name=fname,
                urls=(f"{MULAN_RAW}/{folder}/{fname}",),
                sha256=sha,
                size=size,
                role=role,
                manual=f"also inside {MULAN_SOURCEFORGE}/{rar} (MULAN's datasets archive; RAR, extract by hand)",
            )
        )
    return DatasetSpec(
        name=name,
        display_name=display,
        kind="tabular",
        format="mulan-arff",
        n_labels=n_labels,
        files=tuple(files),
        n_train=n_train,
        n_test=n_test,
        loader=MULAN_LOADER,
        packaged=packaged,
        notes=notes,
        n_features=n_features,
        mirror_folder=None if folder == name else folder,
    )


RIVER_YEAST = PackagedCopy(
    distribution="river",
    version="0.26.1",
    path="river/datasets/yeast.csv.gz",
    sha256="2969cb4bab877a27adcbe17871fa0b378a1e54b98816cd6106b542ee450a1c09",
    size=840822,
    format="river-yeast-csv",
    replaces=("yeast-train.arff", "yeast-test.arff", "yeast.xml"),
)

_YEAST = _mulan(
    "yeast", "Yeast", "yeast", "yeast",
    {
        "yeast-train.arff": ("e759dc991ff54694a4ff9c4314f3be0d6fd2b1994a4b563f57e416394c6aebbd", 1501117),
        "yeast-test.arff": ("4aaac102bff9669a765bf0b378602e5cc8c3b181048282e2f003117b496d552a", 918515),
        "yeast.xml": ("c3056cc26444b5158b1588d1b73bec9c45429e10f0957ad085903423cb81f247", 526),
    },
    n_labels=14, n_train=1500, n_test=917, n_features=103, rar="yeast.rar",
    packaged=(RIVER_YEAST,),
    notes="Elisseeff & Weston (2001) gene-function data, MULAN train/test split. The PyPI wheel "
    "river==0.26.1 ships the same data as river/datasets/yeast.csv.gz (rows 0-916 = MULAN test, "
    "917-2416 = train; values identical to the ARFF).",
)

_ENRON = _mulan(
    "enron", "Enron", "enron", "enron",
    {
        "enron-train.arff": ("2988cefc1cdf7a8004a20ef84615cc8fa1b5d7434c16687283b41454e2d9d194", 607799),
        "enron-test.arff": ("2f3aad54a8f54caaab4ab01246fe9dd385ba944a2633028f52747b57eac5474e", 324140),
        "enron.xml": ("ed40c92d7f613eed51714912cab10dddc4ce456262137d8fef230d44c7f4457b", 1604),
    },
    n_labels=53, n_train=1123, n_test=579, n_features=1001, rar="enron.rar",
    notes="Not in the paper; MULAN set present in the offline mirror. Sparse ARFF.",
)

_BIBTEX = _mulan(
    "bibtex", "Bibtex", "bibtex", "bibtex",
    {
        "bibtex-train.arff": ("8dcc9de6e0b2cebaec8c1f4fac78431adeeb73cfd3ab879b530a66d366e59174", 2292961),
        "bibtex-test.arff": ("9b03329cde64d3f994bdf7fbbac3f3b10fe185c311cb9ae725475f59c7f3f922", 1215637),
        "bibtex.xml": ("08fe20013c1e75dcf1888c185f5187c95e76495b8518ce289b4d3afce38d1232", 5880),
    },
    n_labels=159, n_train=4880, n_test=2515, n_features=1836, rar="bibtex.rar",
    notes="Not in the paper; MULAN set present in the offline mirror. Sparse ARFF.",
)

_TMC = _mulan(
    "tmc2007-500", "TMC2007-500", "tmc2007", "tmc2007-500",
    {
        "tmc2007-500-train.arff": ("edfe7b7615c6f80e54c92a214437610d1ae36560c5cc6c4253b51c434d258273", 3152791),
        "tmc2007-500-test.arff": ("b24f9c3f1eba77c9da0bbaff093ba41d331b7351be0167a8e1e3852c62e25e38", 1054414),
        "tmc2007-500.xml": ("cb6a67c8ae72fd9b47d89f77aa5b7f6cafb4ba9c20b1124c65a95a3f2caec38d", 783),
    },
    n_labels=22, n_train=21519, n_test=7077, n_features=500, rar="tmc2007.rar",
    notes="Not in the paper; MULAN set present in the offline mirror (500-feature version, "
    "folder tmc2007/ upstream and in the mirror). Sparse ARFF.",
)

_DELICIOUS = _mulan(
    "delicious", "Delicious", "delicious", "delicious",
    {
        "delicious-train.arff": ("030186cdb542ebdd32052fcdbb1ebe30115b3a22518c1b4b198c45eb827aebe1", 3056590),
        "delicious-test.arff": ("2dfb01723a819914b0ca83361177ed413ce3f2169851d9f228d4692915d63944", 757565),
        "delicious.xml": ("4e0c0f93c7d86a39b9fca4aaefaa00e9428f2c80277732dfbf03ca48e2c14da2", 34303),
    },
    n_labels=983, n_train=12920, n_test=3185, n_features=500, rar="delicious.rar",
    notes="Not in the paper; MULAN set present in the offline mirror. Sparse ARFF.",
)

_MEDIAMILL = DatasetSpec(
    name="mediamill",
    display_name="Mediamill",
    kind="tabular",
    format="mulan-arff",
    n_labels=101,
    files=tuple(
        RemoteFile(
            name=fname,
            urls=(),
            sha256=None,
            size=None,
            role=role,
            manual=f"inside {MULAN_SOURCEFORGE}/mediamill.rar (RAR archive, not in the MULAN GitHub "
            "repository; sha256 unknown: not published): extract it and put this file in <mirror>/mediamill/",
        )
        for role, fname in (("train", "mediamill-train.arff"), ("test", "mediamill-test.arff"), ("labels", "mediamill.xml"))
    ),
    n_train=30993,
    n_test=12914,
    loader=MULAN_LOADER,
    notes="Snoek et al. (2006) video concepts, MULAN split (43,907 = 30,993 + 12,914; 120 features). "
    "Only distributed as a RAR archive on sourceforge; sha256 unknown (not published): the "
    "extracted files must be placed in a mirror by hand.",
    n_features=120,
)

# --------------------------------------------------------------------------- VOC 2007
# the per-class label files of the 20 classes of cdgtmll.data.voc.VOC_CLASSES, both splits
_VOC_HASHES = {
    "aeroplane_test.txt": ("f07f209c731a86540497add314bb5afd0fd6b5eeb4d131a40be766edab5bd885", 54472),
    "aeroplane_trainval.txt": ("0c975078d23987bf1bba6f968b8b8982f3e1b3bcb99b7eaa7eda0b2c490359e8", 55121),
    "bicycle_test.txt": ("255908404cfec24ed3472a2573cd23c521fb35d1a3f1e4d264eedc0dcb835f68", 54472),
    "bicycle_trainval.txt": ("f9d51af1ad11abd5c90776d4ad676a928f4f634f8cfcba44dbb219442c1ae3bb", 55121),
    "bird_test.txt": ("791bf8a1d750507b5062847e51cfbbf699177a584362a3dd2426de8b169a418e", 54472),
    "bird_trainval.txt": ("1da79e60ae45663e9235eb616ba07144002246f8beb72082b7a2f812581e859f", 55121),
    "boat_test.txt": ("cdb3a96124627bed051fcb1a2d6529cf4ff243ea45e5251677e15836f7fd44b2", 54472),
    "boat_trainval.txt": ("498ed9df4fb9a6481628034cce8a6f716033f94b6cd7f177640f3a6ece8c4f0f", 55121),
    "bottle_test.txt": ("f29ab8ed3fd07e8aa304bc05f89ecb147067d8b374cab1797952676614f6327b", 54472),
    "bottle_trainval.txt": ("06e7f4b97954e384374102bffa6f3137d163a2dba73d6f1b9d3200790caff963", 55121),
    "bus_test.txt": ("ef4191625df117d59c0bfe850acda628910d4ee09bca4d704db0a3096684785c", 54472),
    "bus_trainval.txt": ("37203cdc3429b791cf41c0ec5f5ece706f48953cb1e0bdf16e0e63507c9b5ed9", 55121),
    "car_test.txt": ("aa27214e2d52328076457a98553666f3208017d0ac86457ace6605279d35fb70", 54472),
    "car_trainval.txt": ("af113dd680d133bdbda0a9aab017e8b80b64b545fbc5343331ca31a03b749f36", 55121),
    "cat_test.txt": ("eeec7b2bf4fdb777c9f9c9c8080eb56246617a4899094082544d0801c66a5b5b", 54472),
    "cat_trainval.txt": ("82c53277a4c71abd50d1148d7d0502f41b9afb2ce19da8ad4ae8626bbd94a854", 55121),
    "chair_test.txt": ("bc90335686e5a1aea43362ede5bf75419ac41e36148c0bcab9f11883bd71f03a", 54472),
    "chair_trainval.txt": ("14237a9542a49d2329ef9de1e1db70e3142cd9bf1f6c0345a659147c98439351", 55121),
    "cow_test.txt": ("d006eea2cc1ae82912cd84056a50550d48ce6e850eea7f8f88cedb7ebaf354ae", 54472),
    "cow_trainval.txt": ("4b88c3a6c504052bb64c467bc33b56629405b5a810f3eb6dfd2be00bee82e16c", 55121),
    "diningtable_test.txt": ("979caa991200bdc3dcf09498a744c8480d367326c236bdada0b91a1fe2122838", 54472),
    "diningtable_trainval.txt": ("b01c6905653dcd1bc8f804705a704e85166ee89eeac85a377d61bc26dd0864d0", 55121),
    "dog_test.txt": ("7841a669da72755c05c1787cc7388c20b6ae1c54ce7675f340d8d456ee68a466", 54472),
    "dog_trainval.txt": ("9b86ea2be6bc1698194a8458ed416cf2894f448f40c1f5b22d901f88e1646ac6", 55121),
    "horse_test.txt": ("0de3695e1a49a95153b8adea1190935f96f5d4779d0fe50825274e0fbc54c0ce", 54472),
    "horse_trainval.txt": ("2e4f47361e32f0b8749cb4b6af99cb72f2db72c14d7fde340a098304d8764009", 55121),
    "motorbike_test.txt": ("baa4c1e866415fcc6e2ee0ff8f6c7127ab2c89e1f9f6d179c7b4cf5e56fba21f", 54472),
    "motorbike_trainval.txt": ("f93c53e9f7fa95394618b0915ac15d11465bc8945e67bf28de2dc10bda48f2ad", 55121),
    "person_test.txt": ("58d022f0ab322d160bca953ae09a2bccf42607e1736b00732723b30b0092e3e0", 54472),
    "person_trainval.txt": ("6c90b9b9e8e5b4b135ae2c7679ac0dcf4a51f22c4e6e250555c14e2291197a24", 55121),
    "pottedplant_test.txt": ("dec73883e1bf0069be5f8385877ee728e1b1c119ff5ce3474dccc25320ca7b07", 54472),
    "pottedplant_trainval.txt": ("3717420e62c851518421517eefc362d38ec53c242c3954e80b90ff434ab1a636", 55121),
    "sheep_test.txt": ("0b339826d269ddfb56de763ef5d43dff8b795fabc25881c366e03bb25e4d363d", 54472),
    "sheep_trainval.txt": ("530640b587583024b230c1768a3b89ade9c1be94747bd1dccddd3539b8ac795a", 55121),
    "sofa_test.txt": ("f9036345ecf8f7e0e5f52654a9d11ba12fb6d8a1a84e3a78bada319b89105ec8", 54472),
    "sofa_trainval.txt": ("82a363c96692661e31550509f27241194429938c17dda48d1df982f917d00913", 55121),
    "test.txt": ("91dcbf1f00b0b9a5d5704678a1af4eb0990aa412d170ebcec0f214f8c36f69a1", 39616),
    "train_test.txt": ("7dd49daca2b62e338572ad8364835a010a6c5d0b496245f7f6e2c53943f73930", 54472),
    "train_trainval.txt": ("395f2b656cfec401830858cbbc37ec17229d8c5272b010e2d5f68c48da2674c4", 55121),
    "trainval.txt": ("b3fe5739990677b13edc0ef83c9853b08276609615e58d84496f18865703ae09", 40088),
    "tvmonitor_test.txt": ("38ece7176f0ca48476bbe77e621e3b31a283e3c6bf7d3b025146805a57369372", 54472),
    "tvmonitor_trainval.txt": ("1c64bfe93463399d8731127f4bdca88f2ea0bdd2beb057b176070ca8d2771028", 55121),
}


def voc_image_archives() -> tuple[RemoteFile, ...]:
    """The VOC2007 image tars, fetched on demand by the image loader (not in ``spec.files``)."""
    return tuple(f for f in voc_files() if f.role.startswith("images-"))


def voc_files() -> tuple[RemoteFile, ...]:
    """Every file of the VOC2007 release: the trainval/test tars (``images-*`` roles) and the
    per-class label lists (``labels-*``)."""
    tars = (
        RemoteFile(
            name="VOCtrainval_06-Nov-2007.tar",
            urls=("http://host.robots.ox.ac.uk/pascal/VOC/voc2007/VOCtrainval_06-Nov-2007.tar",),
            sha256=None,
            role="images-trainval",
            manual="sha256 unknown: not published (the devkit publishes none; torchvision pins "
            "md5 c52e279531787c972589f7e41ab4ae64)",
        ),
        RemoteFile(
            name="VOCtest_06-Nov-2007.tar",
            urls=("http://host.robots.ox.ac.uk/pascal/VOC/voc2007/VOCtest_06-Nov-2007.tar",),
            sha256=None,
            role="images-test",
            manual="sha256 unknown: not published (torchvision pins md5 b6e924de25625d8de591ea690078ad9f)",
        ),
    )
    labels = []
    for split in ("trainval", "test"):
        for fname in [f"{split}.txt"] + [f"{c}_{split}.txt" for c in VOC_CLASSES]:
            sha, size = _VOC_HASHES[fname]
            labels.append(
                RemoteFile(
                    name=f"ImageSets/Main/{fname}",
                    urls=(f"{BING_RAW}/{fname}",),
                    sha256=sha,
                    size=size,
                    role=f"labels-{split}",
                    manual=f"also inside the official tar at VOCdevkit/VOC2007/ImageSets/Main/{fname}",
                )
            )
    return tars + tuple(labels)


_VOC = DatasetSpec(
    name="voc2007",
    display_name="Pascal VOC 2007",
    kind="image",
    format="voc-devkit",
    n_labels=20,
    # only the label files: the image tars (role images-*) are fetched by the loader when
    # no extracted JPEGImages/ is found (cdgtmll.images.datasets), so that an extracted devkit
    # in the mirror suffices and prepare never requires the 900 MB of tars
    files=tuple(f for f in voc_files() if f.role.startswith("labels-")),
    n_train=5011,
    n_test=4952,
    loader="cdgtmll.images.datasets.load_voc2007",
    notes="Everingham et al. (2010). 9,963 images: trainval 5,011 / test 4,952. Image-level labels "
    "from ImageSets/Main/<class>_<split>.txt (1 present, -1 absent, 0 difficult; difficult = negative by "
    "default). Images JPEGImages/<id>.jpg from an extracted devkit (<raw>/voc2007/ or <mirror>/voc2007/) "
    "or the official tars VOCtrainval_06-Nov-2007.tar / VOCtest_06-Nov-2007.tar (sha256 unknown: not "
    "published). Processed X = image row ids, meta image_paths (cdgtmll.images.datasets).",
)

_COCO = DatasetSpec(
    name="coco2014",
    display_name="MS-COCO 2014",
    kind="image",
    format="coco-json",
    n_labels=80,
    files=(
        RemoteFile(
            name="annotations_trainval2014.zip",
            urls=("http://images.cocodataset.org/annotations/annotations_trainval2014.zip",),
            role="annotations",
            manual="sha256 unknown: not published",
        ),
        # image archives train2014.zip / val2014.zip: cdgtmll.data.coco.IMAGE_ARCHIVES,
        # fetched by the loader only when no extracted train2014/ val2014/ is found
    ),
    n_train=82081,
    n_test=40504,
    loader="cdgtmll.data.coco.load_coco2014",
    notes="Lin et al. (2014). Paper: 82,081 train / 40,504 val images, val used as the test split. "
    "Official train2014 has 82,783 images; the 702 without any instance annotation are dropped (= 82,081); "
    "all 40,504 val2014 images are kept (unannotated ones as all-zero rows). 80 labels in ascending "
    "category id. Processed X = image row ids, meta image_paths (cdgtmll.data.coco).",
)


def _xmc(name: str, display: str, archive: str, stems: tuple[str, str], n_labels: int, n_train: int,
         n_test: int, n_features: int, notes: str) -> DatasetSpec:
    """An XC Repository BoW dataset: the two data files (header ``N D L``, rows
    ``l1,l2 f:v ...``) of the repository's bag-of-words archive, read by
    :func:`cdgtmll.data.xmc.load_xmc_bow` (file names and format: see that module)."""
    files = tuple(
        RemoteFile(
            name=fname,
            urls=(),
            sha256=None,
            role=role,
            manual=f"inside the bag-of-words archive {archive} of the Extreme Classification Repository "
            f"{XMC_PAGE} (hosted on Google Drive, no direct URL); sha256 unknown: not published. "
            f"Download by hand, unpack, and put this file in <mirror>/{name}/{fname}",
        )
        for role, fname in zip(("train", "test"), stems)
    )
    return DatasetSpec(
        name=name,
        display_name=display,
        kind="xmc",
        format="xmc-bow",
        n_labels=n_labels,
        files=files,
        n_train=n_train,
        n_test=n_test,
        loader="cdgtmll.data.xmc.load_xmc_bow",
        notes=notes,
        n_features=n_features,
    )


_XMC_NOTE = (" Loader: TF-IDF fitted on the train rows on top of the provided values, then l2 row "
             "normalisation (cdgtmll.data.xmc); validation = a seeded random val_fraction (default 10%) of the train rows.")
_EURLEX = _xmc(
    "eurlex-4k", "Eurlex-4K", "for Eurlex-4K (unpacks to Eurlex/)", ("eurlex_train.txt", "eurlex_test.txt"),
    3993, 15539, 3809, 5000,
    "Mencia & Fürnkranz (2008). Sizes from the XC repository (BoW: 5,000 features, 3,993 labels, "
    "15,539 / 3,809); the paper quotes 3,984 labels and 55k documents." + _XMC_NOTE,
)
_WIKI10 = _xmc(
    "wiki10-31k", "Wiki10-31K", "for Wiki10-31K (unpacks to Wiki10/)", ("wiki10_train.txt", "wiki10_test.txt"),
    30938, 14146, 6616, 101938,
    "Zubiaga (2012). Sizes from the XC repository (BoW: 101,938 features, 30,938 labels, 14,146 / 6,616)."
    + _XMC_NOTE,
)
_AMAZONCAT = _xmc(
    "amazoncat-13k", "AmazonCat-13K", "for AmazonCat-13K (unpacks to AmazonCat/)",
    ("amazonCat_train.txt", "amazonCat_test.txt"), 13330, 1186239, 306782, 203882,
    "McAuley & Leskovec (2013). Sizes from the XC repository (BoW: 203,882 features, 13,330 labels, "
    "1,186,239 / 306,782)." + _XMC_NOTE,
)

REGISTRY: dict[str, DatasetSpec] = {
    s.name: s
    for s in (_YEAST, _MEDIAMILL, _VOC, _COCO, _EURLEX, _WIKI10, _AMAZONCAT, _ENRON, _BIBTEX, _TMC, _DELICIOUS)
}


def available() -> list[str]:
    return sorted(REGISTRY)


# --------------------------------------------------------------------------- config
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_CFG_KEYS = {"format", "train", "test", "xml", "n_labels", "urls", "sha256", "display_name",
             "n_train", "n_test", "notes", "impute", "features", "duplicate_rows"}
#: keys of ``data.custom.<name>`` that are text for people, not data: left out of what the rule
#: prepare_dataset is given (:func:`data_config`), so renaming a dataset re-runs no job but the
#: tables and figures that print the name
PRESENTATION_KEYS = ("display_name", "notes")
#: what prepare does with missing/non-finite feature values (``data.custom.<name>.impute``):
#: 'none' refuses the data (default), 'mean' / 'zero' fill them (cdgtmll.data.prepare)
IMPUTE_RULES = ("none", "mean", "zero")


def spec_from_config(name: str, cfg: Mapping[str, Any], key_prefix: str | None = None) -> DatasetSpec:
    """Build a MULAN-format spec from a config mapping (``data.custom.<name>``)::

        format: mulan-arff            # the only format definable from config
        train: foo-train.arff         # path inside <mirror>/<name>/ (and <raw>/<name>/)
        test: foo-test.arff
        xml: foo.xml                  # label names, or instead:
        n_labels: 12                  # the last 12 attributes are the labels
        urls: {train: [URL, ...], test: [...], xml: [...]}       # optional
        sha256: {train: HEX, test: HEX, xml: HEX}                 # optional (None = unknown)
        display_name, n_train, n_test, notes                      # optional
        impute: none | mean | zero    # missing/non-finite features (prepare; default none)

    Every error is a ``ValueError`` naming the offending key as a dotted path.
    """
    prefix = key_prefix if key_prefix is not None else f"data.custom.{name}"

    def fail(key: str, msg: str) -> None:
        raise ValueError(f"config error at '{prefix}{'.' + key if key else ''}': {msg}")

    if not isinstance(cfg, Mapping):
        fail("", f"expected a mapping, got {type(cfg).__name__}")
    unknown = sorted(set(cfg) - _CFG_KEYS)
    if unknown:
        fail(unknown[0], f"unknown key (allowed: {', '.join(sorted(_CFG_KEYS))})")
    fmt = cfg.get("format")
    if fmt != "mulan-arff":
        fail("format", f"{fmt!r} cannot be defined from config (only 'mulan-arff')")
    for key in ("train", "test"):
        if key not in cfg:
            fail(key, "required for format 'mulan-arff'")
    if ("xml" in cfg) == ("n_labels" in cfg):
        fail("xml", "give exactly one of 'xml' (label-name file) or 'n_labels'")
    n_labels = cfg.get("n_labels")
    if "n_labels" in cfg and (not isinstance(n_labels, int) or isinstance(n_labels, bool) or n_labels < 1):
        fail("n_labels", f"must be a positive integer, got {n_labels!r}")
    urls = cfg.get("urls", {}) or {}
    shas = cfg.get("sha256", {}) or {}
    for key, m in (("urls", urls), ("sha256", shas)):
        if not isinstance(m, Mapping):
            fail(key, "expected a mapping from train/test/xml to values")
        for k in m:
            if k not in ("train", "test", "xml") or k not in cfg:
                fail(f"{key}.{k}", "no such file key in this dataset (use train, test, xml)")
    if cfg.get("impute", "none") not in IMPUTE_RULES:
        fail("impute", f"must be one of {', '.join(IMPUTE_RULES)}, got {cfg.get('impute')!r}")
    for ikey in ("n_train", "n_test"):
        v = cfg.get(ikey)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            fail(ikey, f"must be a non-negative integer, got {v!r}")
    files = []
    for key, role in (("train", "train"), ("test", "test"), ("xml", "labels")):
        if key not in cfg:
            continue
        fname = cfg[key]
        if not isinstance(fname, str) or not fname or fname.startswith("/") or ".." in fname.split("/"):
            fail(key, f"must be a relative file name inside the dataset folder, got {fname!r}")
        u = urls.get(key, ())
        u = (u,) if isinstance(u, str) else tuple(u)
        if not all(isinstance(x, str) and x for x in u):
            fail(f"urls.{key}", "must be a URL or a list of URLs")
        sha = shas.get(key)
        if sha is not None and (not isinstance(sha, str) or not _SHA_RE.match(sha.lower())):
            fail(f"sha256.{key}", f"must be 64 hex digits, got {sha!r}")
        files.append(RemoteFile(name=fname, urls=u, sha256=sha.lower() if sha else None, role=role))
    return DatasetSpec(
        name=name,
        display_name=str(cfg.get("display_name", name)),
        kind="tabular",
        format="mulan-arff",
        n_labels=n_labels,
        files=tuple(files),
        n_train=cfg.get("n_train"),
        n_test=cfg.get("n_test"),
        loader=MULAN_LOADER,
        notes=str(cfg.get("notes", "defined in the config")),
    )


def data_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``data.custom.<name>`` without :data:`PRESENTATION_KEYS`: what determines the prepared data."""
    return {k: v for k, v in cfg.items() if k not in PRESENTATION_KEYS}


def get_spec(name: str, extra: Mapping[str, Any] | None = None) -> DatasetSpec:
    """The spec of ``name``: from ``extra`` (config ``data.custom``: name -> mapping or
    DatasetSpec) first, then the built-in registry. Unknown names raise ``KeyError``
    listing every known name."""
    if extra and name in extra:
        v = extra[name]
        return v if isinstance(v, DatasetSpec) else spec_from_config(name, v)
    if name in REGISTRY:
        return REGISTRY[name]
    known = sorted(set(REGISTRY) | set(extra or {}))
    raise KeyError(f"unknown dataset '{name}'; known: {', '.join(known)}")
