"""Image data and image input, in one place: pixel operations (:mod:`.ops`), image datasets and
their archives (:mod:`.datasets`), end-to-end input for the trainer (:mod:`.trainer_input`) and
frozen-backbone features (:mod:`.features`). The ResNet-50 itself: :mod:`cdgtmll.nn.backbones.resnet`."""
