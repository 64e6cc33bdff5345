#!/usr/bin/python3
"""Trains ResNet-18 with its three auxiliary exits on scikit-learn's handwritten digits and
writes what the resnet18_exits sample needs to show exits that pay: the weights, a held-out
set and PyTorch's own answers on it.

The data ships inside Debian's python3-sklearn (sklearn.datasets.load_digits: 1797 8x8 images,
10 classes), so nothing is downloaded. Each image is scaled to [0, 1], upsampled to 32x32
(bilinear) and repeated on 3 channels, then normalised to mean 0.5, scale 0.5. A fixed
permutation (seed 0) holds out the last 397 images; the other 1400 train the model: the
sample's exact architecture (export_weights.py: torchvision's resnet18 with heads
exits.{0,1,2}.{conv,bn,fc} after layer1, layer2 and layer3), all four outputs trained jointly
on the sum of their cross-entropy losses, Adam 1e-3, batch 64, 6 epochs, seed 0.

Run with Debian's interpreter (python3-torch, python3-torchvision, python3-sklearn):
    /usr/bin/python3 samples/resnet18_exits/train_digits.py --cache build/digits
prints a progress line per epoch and the held-out evaluation, and leaves in
build/digits/<key>/ (key: a hash of this script and export_weights.py, so an edit retrains):
    weights.safetensors       the sample's weight names, 10 classes
    heldout_images.npy        397x3x32x32 float32, exactly what PyTorch evaluated
    heldout_labels.npy        397 float32 (the digit)
    torch_top1.npy            397x4 float32: PyTorch's argmax of exit0, exit1, exit2, final
    torch_confidence.npy      397x4 float32: the largest softmax probability of each
    manifest.json             what was trained, how, and PyTorch's held-out accuracies
A cached folder is reused as it is; `--where` prints the folder without training.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits
except ImportError as e:  # the test fixture turns 77 into "skipped"
    print(f"train_digits.py: {e}; install python3-torch python3-torchvision python3-sklearn",
          file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_weights import ResNet18Exits, write_safetensors  # noqa: E402

SEED = 0
SIZE = 32
HELDOUT = 397
EPOCHS = 6
BATCH = 64
LEARNING_RATE = 1e-3
HEADS = ["exit0", "exit1", "exit2", "final"]
FILES = ["weights.safetensors", "heldout_images.npy", "heldout_labels.npy", "torch_top1.npy",
         "torch_confidence.npy", "manifest.json"]


def cache_key():
    """Changes whenever this script or the model definition it imports changes."""
    digest = hashlib.sha256()
    for name in ("train_digits.py", "export_weights.py"):
        with open(os.path.join(HERE, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


def dataset():
    digits = load_digits()
    images = torch.from_numpy(digits.images.astype(np.float32) / 16.0).unsqueeze(1)  # Nx1x8x8
    images = F.interpolate(images, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    images = ((images - 0.5) / 0.5).repeat(1, 3, 1, 1).contiguous()
    labels = torch.from_numpy(digits.target.astype(np.int64))
    order = torch.from_numpy(np.random.default_rng(SEED).permutation(len(labels)))
    train, heldout = order[:-HELDOUT], order[-HELDOUT:]
    return images[train], labels[train], images[heldout], labels[heldout]


def train(model, images, labels, log):
    generator = torch.Generator().manual_seed(SEED)
    optimiser = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    steps = EPOCHS * ((len(labels) + BATCH - 1) // BATCH)
    # Cosine decay to zero: the last steps settle the weights instead of leaving them wherever
    # the last full-rate step of Adam put them.
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, steps)
    model.train()
    for epoch in range(1, EPOCHS + 1):
        start = time.monotonic()
        order = torch.randperm(len(labels), generator=generator)
        total_loss, correct = 0.0, 0
        for first in range(0, len(labels), BATCH):
            batch = order[first:first + BATCH]
            x, y = images[batch], labels[batch]
            outputs = model(x)
            loss = sum(F.cross_entropy(out, y) for out in outputs)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            total_loss += loss.item() * len(batch)
            correct += (outputs[-1].argmax(1) == y).sum().item()
        log(f"epoch {epoch}/{EPOCHS}: loss {total_loss / len(labels):.3f} (sum of 4 heads), "
            f"train accuracy (final) {100.0 * correct / len(labels):.1f}%, "
            f"{time.monotonic() - start:.1f} s")


def recalibrate_batch_norm(model, images):
    """BatchNorm statistics of the final weights over the whole training set (a cumulative
    average, not the running one, which lags behind weights that moved during the epoch)."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for first in range(0, len(images), BATCH):
            model(images[first:first + BATCH])


def evaluate(model, images, labels):
    model.eval()
    with torch.no_grad():
        outputs = model(images)
    top1 = torch.stack([out.argmax(1) for out in outputs], 1)
    confidence = torch.stack([F.softmax(out, 1).max(1).values for out in outputs], 1)
    return top1, confidence


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", required=True, help="folder holding one subfolder per key")
    parser.add_argument("--where", action="store_true",
                        help="print the folder this script's version uses, and exit")
    parser.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 4),
                        help="torch threads (default: the cores, at most 4)")
    args = parser.parse_args()

    folder = os.path.join(os.path.abspath(args.cache), cache_key())
    if args.where:
        print(folder)
        return
    if all(os.path.isfile(os.path.join(folder, f)) for f in FILES):
        print(f"train_digits.py: using the trained model in {folder}")
        return

    def log(line):
        print(f"train_digits.py: {line}", flush=True)

    torch.set_num_threads(max(args.threads, 1))
    torch.manual_seed(SEED)
    log(f"training ResNet-18 with 3 exits on sklearn digits ({EPOCHS} epochs, "
        f"{1797 - HELDOUT} images, {torch.get_num_threads()} threads; about 30 s, once)")
    train_images, train_labels, heldout_images, heldout_labels = dataset()
    model = ResNet18Exits(10)
    start = time.monotonic()
    train(model, train_images, train_labels, log)
    recalibrate_batch_norm(model, train_images)
    seconds = time.monotonic() - start
    top1, confidence = evaluate(model, heldout_images, heldout_labels)
    accuracy = {h: (top1[:, k] == heldout_labels).float().mean().item() for k, h in enumerate(HEADS)}
    confident = (confidence[:, 0] >= 0.9)
    log("held-out accuracy in PyTorch: " +
        ", ".join(f"{h} {100 * a:.1f}%" for h, a in accuracy.items()) +
        f"; exit0 confident (>= 0.9) on {100 * confident.float().mean().item():.0f}%")

    os.makedirs(os.path.dirname(folder), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".train-", dir=os.path.dirname(folder))
    try:
        write_safetensors(os.path.join(staging, "weights.safetensors"), model.flat_state_dict(),
                          {"format": "pt", "model": "resnet18_exits", "classes": 10,
                           "dataset": "sklearn digits", "seed": SEED})

        def save(name, tensor):
            np.save(os.path.join(staging, name), tensor.numpy().astype("<f4"))

        save("heldout_images.npy", heldout_images)
        save("heldout_labels.npy", heldout_labels)
        save("torch_top1.npy", top1)
        save("torch_confidence.npy", confidence)
        manifest = {
            "dataset": "sklearn digits (load_digits), 8x8 upsampled bilinear to 32x32, 3 channels, "
                       "(x/16 - 0.5) / 0.5",
            "images": HELDOUT, "train_images": 1797 - HELDOUT, "classes": 10, "size": SIZE,
            "heads": HEADS, "seed": SEED, "epochs": EPOCHS, "batch": BATCH,
            "learning_rate": LEARNING_RATE, "training_seconds": round(seconds, 1),
            "torch": torch.__version__, "torch_accuracy": accuracy, "key": cache_key(),
        }
        with open(os.path.join(staging, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=2)
        try:
            os.rename(staging, folder)
        except OSError:
            # Another run finished the same key first: its files are the same model.
            if not all(os.path.isfile(os.path.join(folder, f)) for f in FILES):
                raise
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging)
    log(f"wrote {folder}")


if __name__ == "__main__":
    main()
