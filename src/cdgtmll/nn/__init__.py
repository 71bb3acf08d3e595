"""Shared neural components: the backbones (:mod:`.backbones`: the tabular MLP, the TF-IDF linear
backbone, the ResNet-50, and which method and dataset gets which), the trainer's sparse TF-IDF
rows (:mod:`.sparse`), the losses (:mod:`.losses`) and the one training loop (:mod:`.trainer`, with
:mod:`.checkpoint`, :mod:`.divergence`, :mod:`.val_metrics` and :mod:`.progress`)."""
