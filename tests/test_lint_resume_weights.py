"""FWD504 torch-resume-from-weights-only: a PyTorch resume that restores the model weights
but not the optimizer (or its scheduler, or AMP's scaler), and the loads that are not
resumes (pretrained weights, partial checkpoints, frameworks that restore everything).
Held-out measure: benchmarks/lint_corpus/RULE-resume-weights-only.md."""

from __future__ import annotations

from fwd9m import lint
from fwd9m.lint import Config

_ON = Config(select=["FWD504"])
_HEAD = "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
_TRAIN = "for epoch in range(start_epoch, 90):\n    loss.backward()\n    opt.step()\n"


def _lines(source: str, path: str = "train.py") -> list[int]:
    return [f.line for f in lint.lint_source(source, path, _ON) if f.code == "FWD504"]


def _messages(source: str) -> list[str]:
    return [f.message for f in lint.lint_source(source, "train.py", _ON) if f.code == "FWD504"]


# -- true cases ------------------------------------------------------------------------


def test_weights_and_epoch_from_the_checkpoint():
    """pytorch-cifar's --resume: weights and start epoch, no optimizer state."""
    src = (
        _HEAD + "if args.resume:\n    ckpt = torch.load(args.resume)\n"
        "    model.load_state_dict(ckpt['state_dict'])\n    start_epoch = ckpt['epoch']\n" + _TRAIN
    )
    assert _lines(src) == [5]
    assert "no optimizer state" in _messages(src)[0]


def test_resume_word_in_the_if_test_without_step_count():
    src = _HEAD + "if args.resume:\n    model.load_state_dict(torch.load(path))\n" + _TRAIN
    assert _lines(src) == [4]


def test_restart_at_an_epoch_option():
    """PyTorch-GAN: ``if opt.epoch != 0:`` reloads the networks saved at that epoch."""
    src = (
        "import torch\nG.load_state_dict(torch.load('g.pth'))\n"
        "if opt.epoch != 0:\n    G.load_state_dict(torch.load('saved/G_%d.pth' % opt.epoch))\n"
        "optimizer_G = torch.optim.Adam(G.parameters())\n"
        "for epoch in range(opt.epoch, opt.n_epochs):\n    loss.backward()\n"
    )
    assert _lines(src) == [4]


def test_step_count_parsed_from_the_loaded_path():
    """deep-text-recognition-benchmark: start_iter from the checkpoint's file name."""
    src = (
        "import torch\ndef train(opt):\n    if opt.saved_model != '':\n"
        "        model.load_state_dict(torch.load(opt.saved_model))\n"
        "    optimizer = torch.optim.Adam(model.parameters())\n    start_iter = 0\n"
        "    if opt.saved_model != '':\n        start_iter = int(opt.saved_model.split('_')[-1].split('.')[0])\n"
        "    loss.backward()\n"
    )
    assert _lines(src) == [4]


def test_the_last_load_of_a_function_is_reported():
    """pytorch-cifar100: the best weights are loaded to evaluate, then the latest to resume."""
    src = (
        _HEAD + "def main():\n    if args.resume:\n        net.load_state_dict(torch.load(best))\n"
        "        net.load_state_dict(torch.load(recent))\n" + _TRAIN
    )
    assert _lines(src) == [6]


def test_optimizer_restored_but_not_the_scheduler():
    src = (
        _HEAD + "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 200)\n"
        "ckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\n"
        "opt.load_state_dict(ckpt['optimizer'])\nstart_epoch = ckpt['epoch']\n" + _TRAIN
    )
    assert _lines(src) == [5]
    assert "without the LR scheduler state" in _messages(src)[0]


def test_optimizer_restored_but_not_the_grad_scaler():
    src = (
        _HEAD + "scaler = torch.cuda.amp.GradScaler()\n"
        "ckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\n"
        "opt.load_state_dict(ckpt['optimizer'])\nstart_epoch = ckpt['epoch']\n" + _TRAIN
    )
    assert _lines(src) == [5]
    assert "GradScaler" in _messages(src)[0]


# -- not a resume, or nothing lost ---------------------------------------------------


def test_pretrained_weights_are_not_a_resume():
    src = _HEAD + "ckpt = torch.load('resnet50-imagenet.pth')\nmodel.load_state_dict(ckpt['state_dict'])\n" + _TRAIN
    assert _lines(src) == []


def test_epoch_only_printed_is_not_a_resume():
    src = (
        _HEAD + "ckpt = torch.load(args.pretrained)\nmodel.load_state_dict(ckpt['model'])\n"
        "print('pretrained for', ckpt['epoch'], 'epochs')\n" + _TRAIN
    )
    assert _lines(src) == []


def test_strict_false_is_a_partial_checkpoint():
    src = (
        _HEAD + "ckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'], strict=False)\n"
        "start_epoch = ckpt['epoch']\n" + _TRAIN
    )
    assert _lines(src) == []
    assert _lines(src.replace("strict=False", "strict=True")) == [4]


def test_full_resume_is_silent():
    src = (
        _HEAD + "sched = torch.optim.lr_scheduler.StepLR(opt, 30)\nscaler = torch.cuda.amp.GradScaler()\n"
        "ckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\n"
        "opt.load_state_dict(ckpt['optimizer'])\nsched.load_state_dict(ckpt['lr_scheduler'])\n"
        "scaler.load_state_dict(ckpt['scaler'])\nstart_epoch = ckpt['epoch']\n" + _TRAIN
    )
    assert _lines(src) == []


def test_scheduler_positioned_by_the_start_epoch():
    """PyTorch-GAN's LambdaLR is offset by opt.epoch; last_epoch= positions a scheduler too."""
    src = (
        "import torch\nopt = torch.optim.Adam(G.parameters())\n"
        "sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=Decay(opt_.n_epochs, opt_.epoch).step)\n"
        "if opt_.epoch != 0:\n    G.load_state_dict(torch.load('G_%d.pth' % opt_.epoch))\n"
        "    opt.load_state_dict(torch.load('opt_%d.pth' % opt_.epoch))\n"
        "for epoch in range(opt_.epoch, opt_.n_epochs):\n    loss.backward()\n"
    )
    assert _lines(src) == []


def test_sgd_without_momentum_keeps_no_state():
    """pytorch/examples' DDP tutorial: plain SGD has no state to lose."""
    src = (
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=1e-3)\n"
        "snap = torch.load(path)\nmodel.load_state_dict(snap['MODEL_STATE'])\n"
        "epochs_run = snap['EPOCHS_RUN']\nloss.backward()\n"
    )
    assert _lines(src) == []
    assert _lines(src.replace("lr=1e-3", "lr=1e-3, momentum=0.9")) == [4]


def test_evaluation_script_is_not_flagged():
    src = "import torch\nckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\nstart = ckpt['epoch']\n"
    assert _lines(src, "evaluate.py") == []


def test_frameworks_that_restore_everything():
    """Lightning's ckpt_path=, the HF Trainer's resume_from_checkpoint, accelerate's
    load_state, ignite's load_objects restore the optimizer with the weights."""
    base = (
        _HEAD + "ckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\n"
        "start_epoch = ckpt['epoch']\n" + _TRAIN
    )
    assert _lines(base) == [4]
    for extra in (
        "trainer.fit(lit_model, ckpt_path=args.resume)\n",
        "trainer.train(resume_from_checkpoint=args.resume)\n",
        "accelerator.load_state(args.resume)\n",
        "Checkpoint.load_objects(to_load=objs, checkpoint=ckpt)\n",
    ):
        assert _lines(base + extra) == [], extra


def test_test_files_are_not_flagged():
    src = (
        _HEAD + "def test_resume():\n    ckpt = torch.load(p)\n    model.load_state_dict(ckpt['model'])\n"
        "    start_epoch = ckpt['epoch']\n    loss.backward()\n"
    )
    assert _lines(src, "test_resume.py") == []
