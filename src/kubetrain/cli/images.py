"""``kubetrain images``: the local image store that local pods run in (load, pull, list, rm, prune)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.cli._common import fail


def _size(n: int) -> str:
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= f:
            return f"{n / f:.1f} {unit}"
    return f"{n} B"


def _say(message: str) -> None:
    click.echo(message, err=True)


def register(group: click.Group) -> None:
    @group.group("images")
    def images() -> None:
        """Images on this machine that local pods run in (docs/local.md#images).

        A pod runs in its real image when the image is here (loaded, or in your Podman/Buildah store), and in a
        Python environment otherwise; $KUBETRAIN_HOME/images.yaml can say which per image.

        \b
        Examples:
          kubetrain images load -i train.tar          # docker save / podman save / skopeo output
          kubetrain images list
          kubetrain images prune
        """

    @images.command("load")
    @click.option("-i", "--input", "source", required=True, type=click.Path(path_type=Path),
                  help="A docker-archive or OCI archive (.tar), or an OCI image layout directory.")
    @click.option("-t", "--tag", "tags", multiple=True,
                  help="Name the image (repeatable); the archive's own names are used otherwise.")
    def load(source: Path, tags: tuple[str, ...]) -> None:
        """Load images from an archive or OCI layout, as `kind load image-archive` or `docker load -i` do.

        Layers are unpacked once (checked against their digests) and shared by every image and pod that uses
        them; an interrupted load leaves nothing half-done.

        \b
        Examples:
          docker save -o train.tar myorg/train:1.4 && kubetrain images load -i train.tar
          podman save -o train.tar localhost/train:dev && kubetrain images load -i train.tar
          skopeo copy docker://myorg/train:1.4 oci:train-oci:1.4
          kubetrain images load -i train-oci -t myorg/train:1.4
        """
        from kubetrain.service import images as service

        try:
            loaded = service.load(source, tags=list(tags), progress=_say)
        except KubetrainError as exc:
            fail(str(exc))
        for item in loaded:
            names = ", ".join(service.familiar(n) for n in item.image.names) or item.image.id
            click.echo(f"Loaded image: {names} ({item.image.short_id}, {_size(item.image.size)}, "
                       f"{item.seconds:.1f}s)")
            if item.note:
                _say(f"warning: {item.note}")

    @images.command("pull")
    @click.argument("image")
    def pull(image: str) -> None:
        """Pull an image from its registry into the local store, with your registry credentials.

        Uses skopeo, which reads the credentials of `podman login`, `skopeo login` and `docker login` and your
        registries.conf. Pods also pull by themselves per imagePullPolicy when images.yaml says `image`.

        \b
        Examples:
          kubetrain images pull myorg/train:1.4
          kubetrain images pull ghcr.io/kubeflow/trainer/torchtune-trainer@sha256:<digest>
        """
        from kubetrain.service import images as service

        try:
            item = service.pull(image, progress=_say)
        except KubetrainError as exc:
            fail(f"pulling image {image}: {exc}")
        click.echo(f"Pulled image: {image} ({item.image.short_id}, {_size(item.image.size)}, {item.seconds:.1f}s)")

    @images.command("list")
    @click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
    def list_(output: str) -> None:
        """List the images in the local store, like `crictl images` or `podman images`.

        \b
        Examples:
          kubetrain images list
          kubetrain images list -o json
        """
        from kubetrain.service import images as service

        try:
            found = service.images()
        except KubetrainError as exc:
            fail(str(exc))
        if output == "json":
            rows = [{"id": i.id, "names": i.names, "digests": i.digests, "size": i.size, "platform": i.platform,
                     "loaded": i.loaded, "source": i.source} for i in found]
            click.echo(json.dumps(rows, indent=2))
            return
        table = [("IMAGE", "TAG", "IMAGE ID", "SIZE", "LOADED")]
        for i in found:
            age = _age(time.time() - i.loaded)
            for name in i.names or ["<none>:<none>"]:
                short = service.familiar(name)
                repo, _, tag = short.rpartition(":") if ":" in short.split("/")[-1] else (short, "", "<none>")
                table.append((repo, tag, i.short_id, _size(i.size), age))
        widths = [max(len(r[k]) for r in table) for k in range(len(table[0]))]
        for row in table:
            click.echo("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

    @images.command("rm")
    @click.argument("refs", nargs=-1, required=True)
    def rm(refs: tuple[str, ...]) -> None:
        """Remove images (by name, or every name of an image by its id) and the layers no other image uses.

        An image a running TrainJob uses keeps its layers until `kubetrain images prune` after the TrainJob.

        \b
        Examples:
          kubetrain images rm myorg/train:1.4
          kubetrain images rm 27f93b8779eb
        """
        from kubetrain.service import images as service

        try:
            lines = service.remove(list(refs))
        except KubetrainError as exc:
            fail(str(exc))
        for line in lines:
            click.echo(line)

    @images.command("prune")
    @click.option("--dry-run", is_flag=True, help="Only print what would be removed.")
    def prune(dry_run: bool) -> None:
        """Remove images without a name, layers no image uses, and what an interrupted load left behind.

        Images that a running TrainJob uses are kept.

        \b
        Examples:
          kubetrain images prune
          kubetrain images prune --dry-run
        """
        from kubetrain.service import images as service

        try:
            pruned = service.prune(dry_run=dry_run)
        except KubetrainError as exc:
            fail(str(exc))
        verb = "would remove" if dry_run else "removed"
        for what, n in pruned:
            click.echo(f"{verb} {what}" + (f" ({_size(n)})" if n else ""))
        total = sum(n for _, n in pruned)
        _say(f"{verb} {len(pruned)} item(s), {_size(total)}" if pruned else "nothing to prune")


def _age(seconds: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n:
            return f"{int(seconds // n)}{unit} ago"
    return f"{int(seconds)}s ago"
