"""One filesystem abstraction for the history and the model registry: a local path or any URI.

pyarrow's filesystems cover local paths, ``file://``, ``s3://``, ``gs://``, ``abfs://`` and
``hdfs://`` (through libhdfs); any other scheme fsspec knows (``memory://``, ``webhdfs://``, ...) is
wrapped with :class:`pyarrow.fs.PyFileSystem`. The same code therefore writes to a laptop's disk and
to a cluster's object store.
"""

from __future__ import annotations

import posixpath
import uuid
from dataclasses import dataclass

import pyarrow.fs as pafs


MAX_READ_BYTES = 64 * 1024 * 1024
"""The largest file :meth:`Location.read_bytes` reads: a model artifact is kilobytes (its state is orders and
coefficients), a commit marker less."""


class StorageError(OSError):
    """A location that cannot be opened or written; the message names the location."""


@dataclass(frozen=True)
class Location:
    """A filesystem and a root path on it."""

    fs: pafs.FileSystem
    root: str
    uri: str

    def join(self, *parts: str) -> str:
        """Path of ``parts`` under the root (always ``/``-separated)."""
        return posixpath.join(self.root, *parts)

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a directory."""
        return self.fs.get_file_info(path).type == pafs.FileType.Directory

    def list_dirs(self, path: str) -> list[str]:
        """Names of the sub-directories of ``path`` (empty if it does not exist)."""
        if not self.is_dir(path):
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        return sorted(info.base_name for info in infos if info.type == pafs.FileType.Directory)

    def read_bytes(self, path: str, limit: int = MAX_READ_BYTES) -> bytes:
        """The whole content of the regular file at ``path``, at most ``limit`` bytes; StorageError for anything
        else: a FIFO (opening it blocks until someone writes), a device (``/dev/zero`` reads until memory runs out),
        a directory, or a file over the limit. What a registry or a history holds is read only as what it claims
        to be."""
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"{path}: no such file")
        if info.type != pafs.FileType.File:
            raise StorageError(f"{path}: not a regular file")
        if info.size is not None and info.size > limit:
            raise StorageError(f"{path}: {info.size} bytes, over the {limit} byte limit")
        with self.fs.open_input_stream(path) as stream:
            data = bytes(stream.read(limit + 1))
        if len(data) > limit:
            raise StorageError(f"{path}: over the {limit} byte limit")
        return data

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        """Write ``data`` to a temporary name next to ``path``, then move it into place.

        On local disks and HDFS the move is an atomic rename, so a reader sees the old file or the new
        one, never half of one; on object stores a single PUT is atomic per object anyway.
        """
        parent = posixpath.dirname(path)
        self.fs.create_dir(parent, recursive=True)
        temporary = posixpath.join(parent, f".tmp-{uuid.uuid4().hex}-{posixpath.basename(path)}")
        with self.fs.open_output_stream(temporary) as stream:
            stream.write(data)
        try:
            self.fs.move(temporary, path)
        except OSError:
            # Some stores refuse to move onto an existing object: delete, then move.
            self.fs.delete_file(path)
            self.fs.move(temporary, path)

    def delete_dir(self, path: str) -> None:
        """Delete ``path`` and everything under it; a missing directory is fine."""
        if self.exists(path):
            self.fs.delete_dir(path)


def open_location(uri: str) -> Location:
    """Resolve a local path or a URI to a :class:`Location`; raises :class:`StorageError` if unsupported."""
    text = str(uri)
    if not text:
        raise StorageError("empty location")
    if "://" not in text:
        local = pafs.LocalFileSystem()
        root = posixpath.abspath(text)
        return Location(local, root, text)
    try:
        fs, root = pafs.FileSystem.from_uri(text)
        return Location(fs, root.rstrip("/") or "/", text)
    except (OSError, ValueError) as arrow_error:  # ArrowInvalid is a ValueError
        try:
            import fsspec

            spec_fs, root = fsspec.core.url_to_fs(text)
        except (ImportError, ValueError) as exc:
            raise StorageError(f"{text}: unsupported location ({arrow_error}; {exc})") from None
        wrapped = pafs.PyFileSystem(pafs.FSSpecHandler(spec_fs))
        return Location(wrapped, root.rstrip("/") or "/", text)
