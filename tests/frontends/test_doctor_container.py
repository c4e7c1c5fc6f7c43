"""The doctor's container line: which engine, which piece is withheld, and the option for it."""

from __future__ import annotations

import pytest

from jigcmd.frontends.diagnosis.container import (
    CAP_NET_ADMIN,
    CAP_SYS_ADMIN,
    Engine,
    container_check,
    detect_engine,
    host_uid,
    missing_pieces,
    proc_overmounts,
    recipe,
)

EVERY_CAP = (1 << 41) - 1
NO_CGROUP_PROBLEMS: list[str] = []


@pytest.mark.parametrize(
    ("containerenv", "dockerenv", "environ", "engine"),
    [
        ('engine="podman-4.3.1"\n', False, None, "podman"),
        (None, True, None, "docker"),
        (None, False, b"PATH=/bin\0container=podman\0", "podman"),
        (None, False, b"container=lxc\0", "container"),
        (None, False, b"PATH=/bin\0HOME=/root\0", None),
        (None, False, None, None),
    ],
)
def test_the_engine_is_read_from_what_it_leaves_behind(
    containerenv: str | None, dockerenv: bool, environ: bytes | None, engine: Engine | None
) -> None:
    """/run/.containerenv is podman, /.dockerenv docker, container= in pid 1's environment."""
    found = detect_engine(containerenv=containerenv, dockerenv=dockerenv, init_environ=environ)
    assert found == engine


def test_only_mounts_over_parts_of_proc_count_as_masks() -> None:
    """/proc itself is not an overmount; /proc/kcore and /proc/sys are."""
    points = ["/", "/proc", "/proc/kcore", "/sys", "/proc/sys"]
    assert proc_overmounts(points) == ["/proc/kcore", "/proc/sys"]


def pieces(engine: Engine = "podman", /, **facts: object) -> dict[str, str]:
    """missing_pieces with everything present unless `facts` says otherwise, by piece."""
    given: dict[str, object] = {
        "cap_eff": EVERY_CAP,
        "overmounts": [],
        "cgroup_mode": "hybrid",
        "cgroup_problems": NO_CGROUP_PROBLEMS,
        "userns_ok": True,
        **facts,
    }
    found = missing_pieces(engine, **given)  # type: ignore[arg-type]
    return {p.piece: p.option for p in found}


def test_a_complete_container_withholds_nothing() -> None:
    """Every capability, an unmasked /proc, writable cgroups: no piece is missing."""
    assert pieces() == {}
    assert container_check("podman", []).status == "ok"


@pytest.mark.parametrize(
    ("facts", "piece", "option"),
    [
        ({"cap_eff": EVERY_CAP & ~(1 << CAP_SYS_ADMIN)}, "CAP_SYS_ADMIN", "--cap-add SYS_ADMIN"),
        ({"cap_eff": EVERY_CAP & ~(1 << CAP_NET_ADMIN)}, "CAP_NET_ADMIN", "--cap-add NET_ADMIN"),
        # In the engines' default set, so withheld only by --cap-drop ALL (drop: [ALL]).
        ({"cap_eff": EVERY_CAP & ~(1 << 7)}, "CAP_SETUID", "--cap-add SETUID"),
        ({"cap_eff": EVERY_CAP & ~(1 << 6)}, "CAP_SETGID", "--cap-add SETGID"),
        ({"overmounts": ["/proc/kcore"]}, "unmasked /proc", "--security-opt 'unmask=/proc/*'"),
        (
            {"cgroup_problems": ["cannot create cgroups in /sys/fs/cgroup/cpu"]},
            "writable cgroups v1",
            "-v /sys/fs/cgroup:/sys/fs/cgroup:rw",
        ),
        (
            {"cgroup_mode": "v2", "cgroup_problems": ["cannot create cgroups"]},
            "writable cgroups v2",
            "--cgroupns=private --security-opt unmask=/sys/fs/cgroup",
        ),
        ({"userns_ok": False}, "namespace syscalls", "--security-opt seccomp=unconfined"),
    ],
)
def test_each_withheld_piece_is_named_with_the_podman_option_that_gives_it(
    facts: dict[str, object], piece: str, option: str
) -> None:
    """One missing fact, one piece, its exact option; nothing else is blamed."""
    assert pieces(**facts) == {piece: option}


def test_docker_gets_its_own_spelling_of_the_proc_option() -> None:
    """Docker unmasks /proc with systempaths=unconfined."""
    assert pieces("docker", overmounts=["/proc/kcore"]) == {
        "unmasked /proc": "--security-opt systempaths=unconfined"
    }


def test_without_root_no_capability_is_asked_for() -> None:
    """An unprivileged jigcmd builds its namespaces inside a user namespace: no caps needed."""
    assert pieces(cap_eff=0, root=False) == {}


def test_the_failed_line_lists_every_piece_and_one_command_line_of_options() -> None:
    """The detail names each piece and why; the hint is the options to start the container."""
    found = missing_pieces(
        "podman",
        cap_eff=0,
        overmounts=["/proc/acpi"],
        cgroup_mode="hybrid",
        cgroup_problems=["cannot create cgroups in /sys/fs/cgroup/cpu (cpu)"],
        userns_ok=True,
    )
    check = container_check("podman", found)
    assert check.status == "FAIL"
    assert check.detail.startswith("podman container withholds: CAP_SYS_ADMIN (")
    assert check.hint == (
        "start the container with --cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SETUID "
        "--cap-add SETGID --security-opt 'unmask=/proc/*' -v /sys/fs/cgroup:/sys/fs/cgroup:rw "
        "(see docs/deployment.md)"
    )


def test_after_cap_drop_all_the_four_capabilities_the_envelope_uses_are_each_asked_for() -> None:
    """`--cap-drop ALL --cap-add SYS_ADMIN --cap-add NET_ADMIN` (CapEff bits 21 and 12 only)
    fails the line naming CAP_SETUID and CAP_SETGID, not "every piece the envelope needs"."""
    found = missing_pieces(
        "podman",
        cap_eff=1 << CAP_SYS_ADMIN | 1 << CAP_NET_ADMIN,
        overmounts=[],
        cgroup_mode="hybrid",
        cgroup_problems=[],
        userns_ok=True,
    )
    check = container_check("podman", found)
    assert check.status == "FAIL"
    assert [p.piece for p in found] == ["CAP_SETUID", "CAP_SETGID"]
    assert check.hint == (
        "start the container with --cap-add SETUID --cap-add SETGID (see docs/deployment.md)"
    )


def test_the_recipe_is_exactly_the_options_the_diagnosis_names() -> None:
    """What the docs and tests start containers with is what the doctor asks for."""
    assert recipe("podman", "hybrid") == {
        "CAP_SYS_ADMIN": ["--cap-add", "SYS_ADMIN"],
        "CAP_NET_ADMIN": ["--cap-add", "NET_ADMIN"],
        "unmasked /proc": ["--security-opt", "unmask=/proc/*"],
        "writable cgroups v1": ["-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"],
    }
    # After --cap-drop ALL the engine's default capabilities the envelope uses come back too.
    assert list(recipe("podman", "hybrid", dropped_all=True)) == [
        "CAP_SYS_ADMIN",
        "CAP_NET_ADMIN",
        "CAP_SETUID",
        "CAP_SETGID",
        "unmasked /proc",
        "writable cgroups v1",
    ]


def test_outside_a_container_the_line_says_so() -> None:
    """No engine: an ok line that claims nothing."""
    assert container_check(None, []).detail == "not in a container"


@pytest.mark.parametrize(
    ("uid_map", "uid"),
    [
        ("         0       1001          1\n         1     100000      65536\n", 1001),
        ("         0          0 4294967295\n", 0),
        ("", None),
    ],
)
def test_the_host_uid_of_the_containers_root_is_read_from_its_uid_map(
    uid_map: str, uid: int | None
) -> None:
    """Rootless podman maps uid 0 to the user's own uid; a rootful container to 0."""
    assert host_uid(uid_map) == uid


def test_a_rootless_container_without_writable_cgroups_is_told_how_to_delegate_them() -> None:
    """Root in a rootless container is host uid 1001: the mount alone cannot make cgroups
    writable, so the delegation of jigcmd-u1001 and JIGCMD_CGROUP_BASE are named too."""
    found = pieces(cgroup_problems=["cannot create cgroups in /sys/fs/cgroup/cpu"], host_uid=1001)
    assert found["writable cgroups v1"] == "-v /sys/fs/cgroup:/sys/fs/cgroup:rw"
    assert "chown -R 1001 /sys/fs/cgroup/$c/jigcmd-u1001" in found["delegated cgroups"]
    assert "-e JIGCMD_CGROUP_BASE=jigcmd-u1001" in found["delegated cgroups"]
    check = container_check(
        "podman",
        missing_pieces(
            "podman",
            cap_eff=EVERY_CAP,
            overmounts=[],
            cgroup_mode="hybrid",
            cgroup_problems=["x"],
            userns_ok=True,
            host_uid=1001,
        ),
    )
    assert check.hint is not None
    assert check.hint.startswith(
        "start the container with -v /sys/fs/cgroup:/sys/fs/cgroup:rw; as root:"
    )


def test_a_rootless_container_whose_cgroup_mount_is_writable_is_not_asked_for_the_bind() -> None:
    """Bound read-write already, the refusal is EACCES on host root's directories: the
    delegation alone is named, with the refusal's words as its reason."""
    found = missing_pieces(
        "podman",
        cap_eff=EVERY_CAP,
        overmounts=[],
        cgroup_mode="hybrid",
        cgroup_problems=["cannot create cgroups in /sys/fs/cgroup/cpu: permission denied"],
        userns_ok=True,
        host_uid=1001,
        cgroup_read_only=False,
    )
    assert [p.piece for p in found] == ["delegated cgroups"]
    assert "permission denied" in found[0].why and "host uid 1001" in found[0].why
    hint = container_check("podman", found).hint
    assert hint is not None and "-v /sys/fs/cgroup" not in hint, hint
