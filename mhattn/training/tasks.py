"""The two training tasks: planted head roles (synthetic) and CPython's own text.

**Roles** (the test bed for head analysis). Tokens are drawn i.i.d. from a Zipf
distribution over V ids, ``P(v) ∝ 1/(v+1)^s``, so id 0 is the most frequent and
id V-1 the rarest. Every position has three targets, one classifier each:

* ``prev``: the token at offset -1 (position 0 gets the boundary class ``BOS = V``);
* ``next``: the token at offset +1 (position T-1 gets ``EOS = V+1``);
* ``rare``: the rarest token in the sequence (the largest id).

A head that looks one step back, one that looks one step ahead and one that
looks at the rarest token solve the task: the three kinds Voita et al. 2019 (§5)
found in translation models (positional and rare-word heads).

**Text**: next-character prediction on the documentation strings that ship with
CPython (``pydoc_data.topics``), the first 90% of characters for training and the
last 10% for validation. The deep model's larger text task is in :mod:`mhattn.training.textdata`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

ROLE_NAMES = ("prev", "next", "rare")


@runtime_checkable
class Task(Protocol):
    """What the training loop, the evaluation and the head analysis need from a task.

    ``ids`` are ``(B, T)`` int64 token ids in ``[0, vocab_size)``; ``targets`` is a tuple
    with one ``(B, T)`` int64 array per classifier (``len(output_sizes)`` of them).
    """

    name: str  # recorded in checkpoints; task_from_meta rebuilds the task from it
    vocab_size: int  # V, input token ids
    seq_len: int  # T
    output_names: tuple  # one name per classifier
    output_sizes: tuple  # classes per classifier
    causal: bool  # whether the model must not see future positions

    def sample(self, batch_size: int, rng: np.random.Generator) -> tuple:
        """A fresh training batch ``(ids, targets)``."""
        ...

    def eval_set(self, n: int, seed: int) -> tuple:
        """A fixed evaluation set ``(ids, targets)`` of ``n`` sequences."""
        ...

    def rarity(self) -> np.ndarray:
        """``(V,)`` rank of each id by rarity: larger is rarer."""
        ...

    def to_meta(self) -> dict:
        """JSON-ready arguments that rebuild the task (with ``name``)."""
        ...


class RolesTask:
    """Synthetic sequences with three per-position targets (see module docstring).

    Args:
        vocab_size: V; classes per target are V + 2 (two boundary classes).
        seq_len: T. zipf_s: Zipf exponent s.
    """

    name = "roles"

    def __init__(self, vocab_size=64, seq_len=16, zipf_s=1.0):
        if vocab_size < 2 or seq_len < 2:
            raise ValueError(f"roles task needs vocab_size >= 2 and seq_len >= 2, got {vocab_size}, {seq_len}")
        self.vocab_size, self.seq_len, self.zipf_s = int(vocab_size), int(seq_len), float(zipf_s)
        p = 1.0 / np.arange(1, vocab_size + 1) ** self.zipf_s
        self.probs = p / p.sum()  # (V,) unigram distribution, decreasing in the id
        self.output_names = ROLE_NAMES
        self.output_sizes = (vocab_size + 2,) * 3
        self.causal = False

    def targets(self, ids):
        """``ids`` ``(B, T)`` -> ``(prev, next, rare)``, each ``(B, T)`` int64."""
        B, T = ids.shape
        V = self.vocab_size
        prev = np.concatenate([np.full((B, 1), V), ids[:, :-1]], axis=1)  # (B, T)
        nxt = np.concatenate([ids[:, 1:], np.full((B, 1), V + 1)], axis=1)  # (B, T)
        rare = np.repeat(ids.max(axis=1, keepdims=True), T, axis=1)  # (B, T) largest id = rarest
        return prev.astype(np.int64), nxt.astype(np.int64), rare.astype(np.int64)

    def sample(self, batch_size, rng):
        """A fresh batch ``(ids (B, T) int64, targets)`` (the task is infinite: no train/validation split)."""
        ids = rng.choice(self.vocab_size, size=(batch_size, self.seq_len), p=self.probs).astype(np.int64)
        return ids, self.targets(ids)

    def eval_set(self, n=1024, seed=12345):
        """A fixed evaluation set of ``n`` sequences."""
        return self.sample(n, np.random.default_rng(seed))

    def rarity(self):
        """``(V,)`` rank of each id by rarity: larger is rarer."""
        return np.arange(self.vocab_size)

    def to_meta(self):
        return {"name": self.name, "vocab_size": self.vocab_size, "seq_len": self.seq_len, "zipf_s": self.zipf_s}


def load_topics_text():
    """All of ``pydoc_data.topics`` joined in sorted key order (about 465 KB; ships with CPython)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k] for k in sorted(topics))


class TextTask:
    """Character-level language modelling on ``pydoc_data.topics``.

    Args:
        seq_len: T. val_fraction: the last fraction of characters held out.
        charset: the character vocabulary (default: every character of the text);
            characters outside it map to the last id.
    """

    name = "text"

    def __init__(self, seq_len=64, val_fraction=0.1, charset=None):
        text = load_topics_text()
        self.charset = charset if charset is not None else "".join(sorted(set(text)))
        lookup = {c: i for i, c in enumerate(self.charset)}
        unk = len(self.charset) - 1
        self.data = np.array([lookup.get(c, unk) for c in text], dtype=np.int64)  # (N,)
        split = int(len(self.data) * (1.0 - val_fraction))
        self.train, self.val = self.data[:split], self.data[split:]
        self.seq_len, self.val_fraction = int(seq_len), float(val_fraction)
        self.vocab_size = len(self.charset)
        self.output_names = ("next_char",)
        self.output_sizes = (self.vocab_size,)
        self.causal = True

    def sample(self, batch_size, rng, split="train"):
        """Random windows of the ``split`` ("train" or "val") text: ``ids`` ``(B, T)`` and the next-character
        targets ``((B, T),)``.

        Raises:
            ValueError: ``split`` is neither "train" nor "val".
        """
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        data = self.train if split == "train" else self.val
        start = rng.integers(0, len(data) - self.seq_len - 1, size=batch_size)
        win = data[start[:, None] + np.arange(self.seq_len + 1)]  # (B, T+1)
        return win[:, :-1], (win[:, 1:],)

    def eval_set(self, n=256, seed=12345, split="val"):
        """A fixed set of ``n`` windows from the held-out text (``split="val"``)."""
        return self.sample(n, np.random.default_rng(seed), split)

    def rarity(self):
        """``(V,)`` rank of each character by rarity in the training text: larger is rarer."""
        counts = np.bincount(self.train, minlength=self.vocab_size)
        return np.argsort(np.argsort(-counts, kind="stable"), kind="stable")

    def decode(self, ids):
        return "".join(self.charset[i] for i in ids)

    def to_meta(self):
        return {"name": self.name, "seq_len": self.seq_len, "val_fraction": self.val_fraction, "charset": self.charset}


TASKS: dict = {}  # name -> task class; task_from_meta rebuilds a checkpoint's task from it


def register(cls):
    """Record a task class under its ``name`` for :func:`task_from_meta` (a class decorator).

    The deep text task registers itself in :mod:`mhattn.training.textdata`, which imports this module;
    the package imports both, so every task is known whichever module is imported first.
    """
    TASKS[cls.name] = cls
    return cls


register(RolesTask)
register(TextTask)


def task_from_meta(meta) -> Task:
    """Rebuild the task recorded in a checkpoint's metadata.

    Raises:
        ValueError: an unknown task name.
    """
    kw = {k: v for k, v in meta.items() if k != "name"}
    if meta.get("name") not in TASKS:
        raise ValueError(f"unknown task {meta.get('name')!r}; expected one of {sorted(TASKS)}")
    return TASKS[meta["name"]](**kw)
