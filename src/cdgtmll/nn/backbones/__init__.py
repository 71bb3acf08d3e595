"""The backbones ``h(x)`` the neural methods' heads sit on (App. E.2), one module each: the tabular
MLP (:mod:`.mlp`), the TF-IDF linear backbone for XMC (:mod:`.tfidf`) and the ResNet-50 for images
(:mod:`.resnet`); which method and dataset gets which: :mod:`.selection`."""
