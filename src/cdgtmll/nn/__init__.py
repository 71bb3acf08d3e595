"""Shared neural components: the tabular backbone (:mod:`.backbone`), the sparse TF-IDF input
(:mod:`.sparse`), the losses (:mod:`.losses`) and the one training loop (:mod:`.trainer`, with
:mod:`.checkpoint`, :mod:`.divergence`, :mod:`.val_metrics` and :mod:`.progress`)."""
