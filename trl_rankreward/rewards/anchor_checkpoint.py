"""RankBuffer's anchor store in a checkpoint: self-contained, and O(what changed) to save.

A checkpoint folder gets an `anchors/` folder with

- `texts-<first>-<last>.sqlite`: the anchor texts, as immutable segments. Texts are
  append-only, so each save exports only the rows added since the previous save into a new
  segment beside the live store (`<store>.segments/`), and every checkpoint holds hard links
  to all segments so far (a copy where the filesystem cannot link): no text is copied twice,
  and the folder still resumes on its own, copied or pushed elsewhere;
- `buffers.sqlite`: every buffer structure (one row per query) and the store's identity and
  text watermark at save time: one consistent snapshot, written by SQLite in C.

A resume replaces the store's buffer structures by the checkpoint's, and merges the text
segments only when the live store cannot already hold them (another store, or one that has
fewer texts than the checkpoint saw): resuming in place reads no text. Every file is written
to a temporary name, fsynced and renamed, so a crash leaves no partial file under a final name.

The functions take the live `SQLiteAnchorStore` (`rewards.sqlite_anchor_store`, which calls them from
its `save_checkpoint` / `load_checkpoint`) and open the checkpoint's snapshots read-only with
the store's own class, so this module does not import the store module.
"""

from __future__ import annotations

import os
import shutil

CHECKPOINT_FOLDER = "anchors"
BUFFERS_FILE = "buffers.sqlite"
_EXPORTED = "exported_upto"  # meta key: the text watermark of the newest segment


def save_anchor_checkpoint(store, checkpoint: str) -> None:
    """Write `checkpoint/anchors/`: links to every text segment (exporting new texts first) and the buffers."""
    segments = f"{store.path}.segments"
    os.makedirs(segments, exist_ok=True)
    done, upto = int(store.meta(_EXPORTED, "0")), store.text_watermark()
    if upto > done:
        store.export(os.path.join(segments, f"texts-{done + 1:012d}-{upto:012d}.sqlite"), texts=(done, upto))
        store.set_meta(_EXPORTED, str(upto))
    folder = os.path.join(checkpoint, CHECKPOINT_FOLDER)
    os.makedirs(folder, exist_ok=True)
    for name in _segments(segments):
        _link_or_copy(os.path.join(segments, name), os.path.join(folder, name))
    meta = {"store_id": store.meta("store_id") or "", "texts_upto": str(upto)}
    store.export(os.path.join(folder, BUFFERS_FILE), buffers=True, meta=meta)


def load_anchor_checkpoint(store, checkpoint: str, *, buffers: bool = True) -> None:
    """Make `store` hold the checkpoint's texts (merging its segments unless it already does) and,
    with `buffers`, exactly its buffer structures."""
    folder = os.path.join(checkpoint, CHECKPOINT_FOLDER)
    snapshot = os.path.join(folder, BUFFERS_FILE)
    saved = _meta(store, snapshot)
    if not (saved.get("store_id") == store.meta("store_id") and store.text_watermark() >= int(saved["texts_upto"])):
        for name in _segments(folder):
            store.merge_from(os.path.join(folder, name))
    if buffers:
        store.import_buffers(snapshot)


def _segments(folder: str) -> list[str]:
    """The text segment files of `folder`, oldest first (their names sort by rowid)."""
    return sorted(n for n in os.listdir(folder) if n.startswith("texts-") and n.endswith(".sqlite"))


def _meta(store, path: str) -> dict[str, str]:
    """The identity and text watermark `save_anchor_checkpoint` wrote into the snapshot at `path`."""
    snapshot = type(store)(path, read_only=True)
    try:
        return {key: snapshot.meta(key) for key in ("store_id", "texts_upto")}
    finally:
        snapshot.close()


def _link_or_copy(source: str, target: str) -> None:
    if os.path.exists(target):
        return  # segments never change: an existing link or copy is this segment
    tmp = f"{target}.tmp"
    if os.path.exists(tmp):  # left by a save killed here
        os.remove(tmp)
    try:
        os.link(source, tmp)
    except OSError:  # another filesystem, or links not supported
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)
