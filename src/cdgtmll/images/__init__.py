"""Image data and image input, in one place: pixel operations (:mod:`.ops`), image datasets and
their archives (:mod:`.datasets`), the ResNet-50 backbone (:mod:`.backbone`), end-to-end input for
the trainer (:mod:`.trainer_input`) and frozen-backbone features (:mod:`.features`)."""
