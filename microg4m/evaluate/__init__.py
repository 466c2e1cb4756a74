"""The benchmark: score a model's predictions on a dataset that microg4m exported.

The paper's protocol (section 5.1, Tables 1-4, appendix G.5): HAR mAP@0.5, macro F1,
recall and AUROC (:mod:`.har`), caption and VQA metrics (:mod:`.text`), and the
vision-language-model baseline (:mod:`.vlm_har`). This role reads the export and
predictions and writes scores; no stage imports it and it imports no stage.
"""
