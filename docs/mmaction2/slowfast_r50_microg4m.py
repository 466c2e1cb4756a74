# mmaction2 (1.x) config: SlowFast R50 action detection on a microg4m export with
# mmaction2's own AVADataset, no user code. Self-contained (no _base_), so it does not
# depend on the file names of mmaction2's shipped configs.
#
# Run it from the folder that holds results/ (or edit data_root / anno_root):
#   python <mmaction2 checkout>/tools/train.py docs/mmaction2/slowfast_r50_microg4m.py
#   python <mmaction2 checkout>/tools/test.py docs/mmaction2/slowfast_r50_microg4m.py CHECKPOINT
# Training needs mmaction2's full install for AVA (mmcv with its ops, mmdet).
default_scope = "mmaction"

data_root = "results/export/frames"  # <clip>/img_00001.jpg ... (links to <clip>/<clip>_000001.jpg)
anno_root = "results/export"
label_file = f"{anno_root}/label_map.pbtxt"

# The 50 MicroG-4M actions keep their AVA ids; mmaction2 maps them to 1..50 (0 = background).
custom_classes = [1, 3, 5, 6, 7, 8, 9, 10, 11, 12, 14, 17, 20, 22, 24, 26, 27, 28, 29, 30,
                  34, 36, 38, 41, 43, 45, 46, 47, 48, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
                  66, 67, 68, 69, 70, 72, 74, 76, 78, 79, 80]
num_classes = len(custom_classes) + 1

# A clip has 90 frames (30 fps) and the frame stamp n is frame n of the clip (1-based).
# mmaction2 centres the window on fps * (stamp - timestamp_start) + start_index, clips it
# to [0, (timestamp_end - timestamp_start) * fps - 1] and adds start_index: with these
# values stamp n reads img_{n:05}.jpg and every sampled frame stays within 1..90.
dataset = dict(
    type="AVADataset",
    label_file=label_file,
    exclude_file=None,
    custom_classes=custom_classes,
    num_classes=num_classes,
    data_prefix=dict(img=data_root),
    filename_tmpl="img_{:05}.jpg",
    fps=1,
    timestamp_start=2,
    timestamp_end=92,
    start_index=1,
    person_det_score_thr=0.55,  # the tracker records boxes above track.record_conf = 0.55
)

train_pipeline = [
    dict(type="SampleAVAFrames", clip_len=32, frame_interval=2),
    dict(type="RawFrameDecode"),
    dict(type="RandomRescale", scale_range=(256, 320)),
    dict(type="RandomCrop", size=256),
    dict(type="Flip", flip_ratio=0.5),
    dict(type="FormatShape", input_format="NCTHW", collapse=True),
    dict(type="PackActionInputs"),
]
test_pipeline = [
    dict(type="SampleAVAFrames", clip_len=32, frame_interval=2, test_mode=True),
    dict(type="RawFrameDecode"),
    dict(type="Resize", scale=(-1, 256)),
    dict(type="FormatShape", input_format="NCTHW", collapse=True),
    dict(type="PackActionInputs"),
]

train_dataloader = dict(
    batch_size=8,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type="DefaultSampler", shuffle=True),
    dataset=dict(
        ann_file=f"{anno_root}/ava_train.csv",
        proposal_file=f"{anno_root}/ava_train_dense_proposals.pkl",
        pipeline=train_pipeline,
        **dataset,
    ),
)
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type="DefaultSampler", shuffle=False),
    dataset=dict(
        ann_file=f"{anno_root}/ava_val_gt.csv",
        proposal_file=f"{anno_root}/ava_val_dense_proposals.pkl",
        pipeline=test_pipeline,
        test_mode=True,
        **dataset,
    ),
)
test_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type="DefaultSampler", shuffle=False),
    dataset=dict(
        ann_file=f"{anno_root}/ava_test_gt.csv",
        proposal_file=f"{anno_root}/ava_test_dense_proposals.pkl",
        pipeline=test_pipeline,
        test_mode=True,
        **dataset,
    ),
)

metric = dict(type="AVAMetric", label_file=label_file, exclude_file=None,
              custom_classes=custom_classes, num_classes=num_classes)
val_evaluator = dict(ann_file=f"{anno_root}/ava_val_gt.csv", **metric)
test_evaluator = dict(ann_file=f"{anno_root}/ava_test_gt.csv", **metric)

# SlowFast R50, 4x16 (slow) / 32x2 (fast), from mmaction2's Kinetics-400 checkpoint.
model = dict(
    type="FastRCNN",
    _scope_="mmdet",
    init_cfg=dict(
        type="Pretrained",
        checkpoint="https://download.openmmlab.com/mmaction/recognition/slowfast/"
        "slowfast_r50_4x16x1_256e_kinetics400_rgb/slowfast_r50_4x16x1_256e_kinetics400_rgb_20200704-bcde7ed7.pth",
    ),
    backbone=dict(
        type="mmaction.ResNet3dSlowFast",
        pretrained=None,
        resample_rate=8,
        speed_ratio=8,
        channel_ratio=8,
        slow_pathway=dict(type="resnet3d", depth=50, pretrained=None, lateral=True, conv1_kernel=(1, 7, 7),
                          dilations=(1, 1, 1, 1), conv1_stride_t=1, pool1_stride_t=1, inflate=(0, 0, 1, 1),
                          spatial_strides=(1, 2, 2, 1)),
        fast_pathway=dict(type="resnet3d", depth=50, pretrained=None, lateral=False, base_channels=8,
                          conv1_kernel=(5, 7, 7), conv1_stride_t=1, pool1_stride_t=1,
                          spatial_strides=(1, 2, 2, 1)),
    ),
    roi_head=dict(
        type="AVARoIHead",
        bbox_roi_extractor=dict(type="SingleRoIExtractor3D", roi_layer_type="RoIAlign", output_size=8,
                                with_temporal_pool=True),
        bbox_head=dict(type="BBoxHeadAVA", background_class=True, in_channels=2304, num_classes=num_classes,
                       multilabel=True, dropout_ratio=0.5),
    ),
    data_preprocessor=dict(type="mmaction.ActionDataPreprocessor", mean=[123.675, 116.28, 103.53],
                           std=[58.395, 57.12, 57.375], format_shape="NCTHW"),
    train_cfg=dict(rcnn=dict(
        assigner=dict(type="MaxIoUAssignerAVA", pos_iou_thr=0.9, neg_iou_thr=0.9, min_pos_iou=0.9),
        sampler=dict(type="RandomSampler", num=32, pos_fraction=1, neg_pos_ub=-1, add_gt_as_proposals=True),
        pos_weight=1.0,
    )),
    test_cfg=dict(rcnn=None),
)

train_cfg = dict(type="EpochBasedTrainLoop", max_epochs=20, val_begin=1, val_interval=1)
val_cfg = dict(type="ValLoop")
test_cfg = dict(type="TestLoop")
param_scheduler = [
    dict(type="LinearLR", start_factor=0.1, by_epoch=True, begin=0, end=5),
    dict(type="MultiStepLR", begin=0, end=20, by_epoch=True, milestones=[10, 15], gamma=0.1),
]
optim_wrapper = dict(optimizer=dict(type="SGD", lr=0.05, momentum=0.9, weight_decay=1e-5),
                     clip_grad=dict(max_norm=40, norm_type=2))
auto_scale_lr = dict(enable=False, base_batch_size=8)  # lr above is for one GPU x batch 8

default_hooks = dict(
    runtime_info=dict(type="RuntimeInfoHook"),
    timer=dict(type="IterTimerHook"),
    logger=dict(type="LoggerHook", interval=20),
    param_scheduler=dict(type="ParamSchedulerHook"),
    checkpoint=dict(type="CheckpointHook", interval=1, save_best="auto"),
    sampler_seed=dict(type="DistSamplerSeedHook"),
)
env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method="fork", opencv_num_threads=0),
               dist_cfg=dict(backend="nccl"))
log_processor = dict(type="LogProcessor", window_size=20, by_epoch=True)
visualizer = dict(type="ActionVisualizer", vis_backends=[dict(type="LocalVisBackend")])
log_level = "INFO"
load_from = None
resume = False

# The config follows the splits the export wrote: a split without clips has no AVA files
# (the demo's val, on purpose: an empty ground truth crashes mmaction2's evaluation after a
# whole epoch). Without ava_val_gt.csv it trains without validation; give val clips (or
# ratios with val > 0 and enough clips) to validate.
try:
    open(f"{anno_root}/ava_val_gt.csv").close()
except OSError:
    val_dataloader = val_evaluator = val_cfg = None
