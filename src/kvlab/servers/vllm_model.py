"""The checkpoint folder a launched vLLM serves, with the SHA-256 of every file.

By default, the bundled Gemma 3 270M converted from the very GGUF llama-server and
``kvlab serve`` load (:mod:`kvlab.servers.gguf_to_hf`, run in vLLM's environment),
cached under ``~/.cache/kvlab/vllm-models/<GGUF sha256[:16]>-<dtype>/`` so it is
converted once. Or any Hugging Face checkpoint folder the user names, checked for
``config.json`` and a tokenizer before anything starts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kvlab.errors import ModelFileError, ServerLaunchError
from kvlab.servers.binary import cache_dir
from kvlab.servers.chat_template import CHATML_WITH_BOS
from kvlab.servers.fetch import ModelFile, fetch_bundled, sha256_file
from kvlab.servers.vllm_env import VllmEnv

CHAT_TEMPLATE_FILE = "chat_template.jinja"
SOURCE_FILE = "kvlab-source.json"  # what the folder was converted from
# A tokenizer is one of these (fast JSON, SentencePiece, or a BPE vocabulary).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


@dataclass(frozen=True)
class ModelDir:
    """A checkpoint folder vLLM loads. ``files``: relative path -> SHA-256;
    ``converted_from``: the GGUF's facts when kvlab converted it (None: the user's);
    ``chat_template``: a template file to pass with ``--chat-template`` (None: the
    checkpoint's own)."""

    path: Path
    files: dict[str, str] = field(default_factory=dict)
    converted_from: dict[str, object] | None = None
    chat_template: Path | None = None

    def facts(self) -> dict[str, object]:
        """For the manifest."""
        return {"path": str(self.path), "files_sha256": self.files,
                "converted_from": self.converted_from,
                "chat_template": str(self.chat_template) if self.chat_template else None}


def hash_files(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder``, by relative path, sorted."""
    return {str(p.relative_to(folder)): sha256_file(p)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def check_hf_dir(folder: Path) -> ModelDir:
    """A user's checkpoint folder, checked; ModelFileError naming the missing file."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ModelFileError(f"vllm.model {folder} is not a folder; give a Hugging Face "
                             "checkpoint folder (config.json, weights, tokenizer)")
    if not (folder / "config.json").is_file():
        raise ModelFileError(f"vllm.model {folder} has no config.json; give a Hugging "
                             "Face checkpoint folder")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise ModelFileError(f"vllm.model {folder} has no tokenizer "
                             f"({' or '.join(TOKENIZER_FILES)})")
    template = folder / CHAT_TEMPLATE_FILE
    return ModelDir(folder, hash_files(folder),
                    chat_template=template if template.is_file() else None)


def converted_dir(gguf_sha256: str, dtype: str) -> Path:
    """Where the conversion of the GGUF with this SHA-256 into ``dtype`` is cached."""
    return cache_dir() / "vllm-models" / f"{gguf_sha256[:16]}-{dtype}"


def convert_bundled(env: VllmEnv, dtype: str = "bfloat16",
                    gguf: ModelFile | None = None) -> ModelDir:
    """The bundled Gemma 3 270M (or ``gguf``) as a checkpoint in ``dtype``, converted by
    ``env``'s Transformers on first use (about a minute), then read from the cache."""
    source = gguf or fetch_bundled()
    target = converted_dir(source.sha256, dtype)
    if not (target / SOURCE_FILE).is_file():
        _convert(env, source, target, dtype)
    converted_from = json.loads((target / SOURCE_FILE).read_text(encoding="utf-8"))
    return ModelDir(target, hash_files(target), converted_from,
                    chat_template=target / CHAT_TEMPLATE_FILE)


def _convert(env: VllmEnv, source: ModelFile, target: Path, dtype: str) -> None:
    """Convert into a temporary folder beside ``target``, then rename: an interrupted
    conversion never leaves a half-written checkpoint where a server would load it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        template = work / CHAT_TEMPLATE_FILE
        template.write_text(CHATML_WITH_BOS, encoding="utf-8")
        started = time.monotonic()
        done = subprocess.run(
            [str(env.python), str(Path(__file__).with_name("gguf_to_hf.py")),
             str(source.path), str(work), dtype, str(template)],
            capture_output=True, text=True, check=False,
            env=_offline_env())
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
            raise ServerLaunchError(f"converting {source.path.name} for vLLM failed: "
                                    f"{lines[-1]}")
        (work / SOURCE_FILE).write_text(json.dumps({
            "gguf": str(source.path), "gguf_sha256": source.sha256, "dtype": dtype,
            "bundled": source.bundled, "converter": "transformers (kvlab.servers.gguf_to_hf)",
            "vllm_env": str(env.python), "seconds": round(time.monotonic() - started, 1),
        }, indent=2) + "\n", encoding="utf-8")
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _offline_env() -> dict[str, str]:
    """kvlab's environment, with the hubs off: everything comes from local files."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
