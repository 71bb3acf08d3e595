"""Generic multi-label architectures: shared parts (:mod:`.common`), label-chain and label-graph
heads (:mod:`.label_graph`: CC, ML-GCN) and attention heads (:mod:`.attention`: C-Tran, ML-Decoder)."""
