"""Plots shared by the CLI and the notebooks (matplotlib, Agg backend for files)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

if "ipykernel" not in __import__("sys").modules:
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402


def _label(col):
    return col.replace("_", " ")


def pick_variants(table, n):
    """Indices of n variants spread over the sweep (by clearance when it is swept)."""
    B = len(table["finite"])
    key = "clearance_m" if "clearance_m" in table else None
    order = np.argsort(table[key]) if key else np.arange(B)
    return [int(order[i]) for i in np.unique(np.linspace(0, B - 1, min(n, B)).round().astype(int))]


def contact_force_vs_crank_angle(ax, hists, idx, table, joint=0):
    """Contact force [N] against the crank angle [deg] (unwrapped) of chosen variants."""
    for i in idx:
        th = np.degrees(np.unwrap(hists["crank_angle_rad"][i]))
        f = hists["contact_force_N"][i][..., joint]
        lab = f"#{i}" + (f" c={table['clearance_m'][i]*1e3:.3g} mm" if "clearance_m" in table else "")
        ax.plot(th, f, lw=0.8, label=lab)
    ax.set_xlabel("crank angle [deg]")
    ax.set_ylabel("contact force [N]")
    ax.legend(fontsize=7)


def orbits(ax, hists, idx, table, clearance=None, joint=0):
    """Journal-centre orbits in the bearing frame, normalised by the clearance (unit circle)."""
    th = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(th), np.sin(th), "k--", lw=0.8, label="clearance circle")
    for i in idx:
        c = table["clearance_m"][i] if "clearance_m" in table else clearance
        x = hists["journal_x_m"][i][..., joint] / c
        y = hists["journal_y_m"][i][..., joint] / c
        ax.plot(x, y, lw=0.6, label=f"#{i}")
    ax.set_aspect("equal")
    ax.set_xlabel("x / c [-]")
    ax.set_ylabel("y / c [-]")
    ax.legend(fontsize=7)


def _edges(u, log):
    """Cell edges around sorted centres u: midpoints inside, half a step beyond the ends
    (in log space when ``log``)."""
    v = np.log(u) if log else np.asarray(u, float)
    mid = 0.5 * (v[1:] + v[:-1])
    e = np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])
    return np.exp(e) if log else e


def amplification_map(ax, table, xkey, ykey, zkey):
    """A metric over two swept axes: pcolormesh on a full grid, scatter otherwise."""
    x, y, z = np.asarray(table[xkey]), np.asarray(table[ykey]), np.asarray(table[zkey], float)
    ux, uy = np.unique(x), np.unique(y)
    logx = ux.size > 2 and ux.min() > 0 and ux.max() / ux.min() > 20
    if ux.size * uy.size <= len(x) and ux.size > 1 and uy.size > 1:
        grid = np.full((uy.size, ux.size), np.nan)
        for xi, yi, zi in zip(x, y, z):
            j, i = np.searchsorted(ux, xi), np.searchsorted(uy, yi)
            grid[i, j] = np.nanmax([grid[i, j], zi])  # max over the other axes
        # cell edges halfway between the values (geometrically on a log axis, so that the first
        # cell does not reach down to ~0)
        im = ax.pcolormesh(_edges(ux, logx), _edges(uy, False), grid, shading="flat")
    else:
        im = ax.scatter(x, y, c=z, s=12)
    if logx:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("{} [{}]".format(*_name_unit(xkey)))
    ax.set_ylabel("{} [{}]".format(*_name_unit(ykey)))
    plt.colorbar(im, ax=ax, label=_label(zkey) + " (max over other axes)")


def sweep_plots(outdir, table, summary, hists, t, spec, amplified=("contact_force", "slider_acceleration")):
    """Write the standard PNGs of a sweep into outdir/plots; return their relative paths.
    amplified: the quantities whose DAF / ratio columns are mapped over the axes."""
    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    written = []
    idx = pick_variants(table, int(spec["outputs"]["plot_variants"]))
    clearance = spec["joint"]["clearance_m"]
    if "contact_force_N" in hists and "crank_angle_rad" in hists:
        fig, ax = plt.subplots(figsize=(8, 4))
        contact_force_vs_crank_angle(ax, hists, idx, table)
        ax.set_title(f"{summary['name']}: contact force ({summary['clearance_joint']} joint)")
        fig.tight_layout()
        fig.savefig(pdir / "contact_force_vs_crank_angle.png", dpi=110)
        plt.close(fig)
        written.append("plots/contact_force_vs_crank_angle.png")
    if "journal_x_m" in hists and "journal_y_m" in hists:
        fig, ax = plt.subplots(figsize=(5, 5))
        orbits(ax, hists, idx, table, clearance)
        ax.set_title("journal-centre orbits")
        fig.tight_layout()
        fig.savefig(pdir / "journal_orbits.png", dpi=110)
        plt.close(fig)
        written.append("plots/journal_orbits.png")
    axes = summary["axes"]
    if len(axes) >= 2:
        for z in tuple(f"daf_{a}_steady" for a in amplified):
            fig, ax = plt.subplots(figsize=(6, 4.5))
            amplification_map(ax, table, axes[0], axes[1], z)
            fig.tight_layout()
            fig.savefig(pdir / f"map_{z}.png", dpi=110)
            plt.close(fig)
            written.append(f"plots/map_{z}.png")
    elif len(axes) == 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        for z in (f"ratio_{amplified[0]}", f"ratio_{amplified[0]}_steady", f"ratio_{amplified[1]}_steady"):
            ax.plot(table[axes[0]], table[z], "o-", label=z)
        ax.set_xlabel(_label(axes[0]))
        ax.set_ylabel("max(clearance) / max(ideal) [-]")
        if np.min(table[axes[0]]) > 0:
            ax.set_xscale("log")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(pdir / "amplification_vs_axis.png", dpi=110)
        plt.close(fig)
        written.append("plots/amplification_vs_axis.png")
    return written


# ----------------------------------------------------------------------------- notebooks
# Figures the tutorial notebooks draw (the CLI figures above are built from the same pieces).
# Each draws into a given matplotlib Axes and returns it; units are in the axis labels.

def _groups(table, keys):
    """Row indices grouped by the distinct values of ``keys`` (columns of table), in order."""
    keys = [k for k in keys if k in table]
    if not keys:
        return [((), np.arange(len(table["finite"])))]
    cols = np.stack([np.asarray(table[k], float) for k in keys], axis=1)
    uniq = np.unique(cols, axis=0)
    return [(tuple(u), np.nonzero(np.all(cols == u, axis=1))[0]) for u in uniq]


_UNITS = (("_m_per_s2", "m/s²"), ("_m_per_s", "m/s"), ("_rad_per_s", "rad/s"), ("_rpm", "rpm"),
          ("_N", "N"), ("_rad", "rad"), ("_m", "m"), ("_s", "s"))


def _name_unit(col):
    """('peak contact force steady', 'N') from 'peak_contact_force_steady_N'; unit '-' without
    a unit suffix (amplification factors, ratios)."""
    for suf, unit in _UNITS:
        if col.endswith(suf):
            return _label(col[: -len(suf)]), unit
    return _label(col), "-"


def _fmt_group(keys, vals):
    return ", ".join(f"{_name_unit(k)[0]} = {v:g} {_name_unit(k)[1]}".replace(" -", "") for k, v in zip(keys, vals))


def peak_vs_clearance(ax, table, metric="peak_contact_force_steady_N", ideal="ideal_peak_reaction_steady_N",
                      by=("crank_speed_rpm", "restitution")):
    """A peak metric against the clearance on log–log axes, one line per combination of the
    ``by`` columns; the ideal (no-clearance) peak of each group dashed in the same colour.
    Clearance in mm on the x axis, the metric's unit from its column name."""
    keys = [k for k in by if k in table]
    c = np.asarray(table["clearance_m"], float)
    for vals, rows in _groups(table, keys):
        rows = rows[np.argsort(c[rows])]
        (line,) = ax.plot(c[rows] * 1e3, np.asarray(table[metric], float)[rows], "o-", ms=3, lw=1,
                          label=_fmt_group(keys, vals) or metric)
        if ideal and ideal in table:
            ax.plot(c[rows] * 1e3, np.asarray(table[ideal], float)[rows], "--", lw=0.8, color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("clearance c [mm]")
    name, unit = _name_unit(metric)
    ax.set_ylabel(f"{name} [{unit}]")
    if ideal and ideal in table:
        ax.plot([], [], "k--", lw=0.8, label="ideal joint (dashed)")
    ax.legend(fontsize=7)
    return ax


MOTION_MODES = ("free_flight_fraction", "impact_fraction", "continuous_contact_fraction")


def motion_modes(ax, table, by=("crank_speed_rpm", "restitution")):
    """Fractions of the run spent in free flight, impact and continuous contact [-] against the
    clearance [mm] (log x); one colour per mode, one line style per combination of ``by``."""
    keys = [k for k in by if k in table]
    c = np.asarray(table["clearance_m"], float)
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "v", "D", "x"]
    cols = plt.get_cmap("tab10")
    for g, (vals, rows) in enumerate(_groups(table, keys)):
        rows = rows[np.argsort(c[rows])]
        for m, mode in enumerate(MOTION_MODES):
            ax.plot(c[rows] * 1e3, np.asarray(table[mode], float)[rows], styles[g % 4],
                    marker=markers[(g // 4) % 6], ms=3, lw=1, color=cols(m),
                    label=(_label(mode.removesuffix("_fraction")) if g == 0 else None))
        ax.plot([], [], styles[g % 4], marker=markers[(g // 4) % 6], color="k", lw=1, ms=3,
                label=_fmt_group(keys, vals))
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("clearance c [mm]")
    ax.set_ylabel("fraction of the run [-]")
    ax.legend(fontsize=7, ncol=2)
    return ax


def profile_radii(ax, profiles, ref_radius):
    """Bushing radius minus a reference radius [µm] against the polar angle [deg] for a dict
    {name: (N, 2) points [m]} — wear and ovalisation are µm on a 10 mm bore, invisible to scale."""
    for name, pts in profiles.items():
        p = np.asarray(pts, float)
        th = np.degrees(np.mod(np.arctan2(p[:, 1], p[:, 0]), 2 * np.pi))
        o = np.argsort(th)
        r = np.hypot(p[:, 0], p[:, 1])
        ax.plot(np.append(th[o], th[o][0] + 360), np.append(r[o], r[o][0]) * 1e6 - ref_radius * 1e6,
                lw=1, label=f"{name} (N = {len(p)})")
    ax.set_xlabel("polar angle θ [deg]")
    ax.set_ylabel(f"r(θ) − {ref_radius * 1e3:.4g} mm [µm]")
    ax.set_xlim(0, 360)
    ax.legend(fontsize=7)
    return ax


def _pin_surface_radius(theta, center, radius):
    """Distance from the bushing origin to the pin surface along the ray θ (origin inside the pin):
    ρ = c·u + sqrt(R² − |c|² + (c·u)²), u = (cos θ, sin θ)."""
    cu = center[0] * np.cos(theta) + center[1] * np.sin(theta)
    return cu + np.sqrt(np.maximum(radius ** 2 - center[0] ** 2 - center[1] ** 2 + cu ** 2, 0.0))


def contact_regions(ax, points, pin_center, pin_radius, regions, ref_radius=None, title=None, center_deg=0.0):
    """Contact regions of ``jaxclear.contact.detect`` drawn over the profile, unwrapped in angle.

    x: polar angle θ [deg]; y: radius minus ``ref_radius`` (default the pin radius) [µm] of the
    bushing points (line) and of the pin surface along each ray (grey).  A point is in contact
    exactly where the pin surface lies beyond the profile (the origin is inside the pin), so the
    shaded gaps between the curves are the penetrations; in-contact points are coloured by region
    slot, the deepest point of each active region marked with its depth [µm].  The x axis spans
    center_deg ± 180°, so a region around center_deg is drawn in one piece."""
    p = np.asarray(points, float)
    c = np.asarray(pin_center, float)
    R = float(pin_radius)
    ref = R if ref_radius is None else float(ref_radius)
    lo = np.radians(center_deg) - np.pi
    th = lo + np.mod(np.arctan2(p[:, 1], p[:, 0]) - lo, 2 * np.pi)  # in [lo, lo + 2π)
    o = np.argsort(th)
    r = np.hypot(p[:, 0], p[:, 1])
    ths = np.linspace(lo, lo + 2 * np.pi, 721)
    ax.plot(np.degrees(np.append(th[o], th[o][0] + 2 * np.pi)), (np.append(r[o], r[o][0]) - ref) * 1e6,
            "k-", lw=0.9, label=f"bushing profile (N = {len(p)})")
    ax.plot(np.degrees(ths), (_pin_surface_radius(ths, c, R) - ref) * 1e6, color="0.55", lw=0.9,
            label="pin surface")
    labels = np.asarray(regions.labels)
    K = np.asarray(regions.depth).shape[0]
    rho = _pin_surface_radius(th, c, R)
    cmap = plt.get_cmap("tab10")
    for j in range(K):
        if not bool(np.asarray(regions.active)[j]):
            continue
        sel = labels == j
        col = cmap(j % 10)
        ax.vlines(np.degrees(th[sel]), (r[sel] - ref) * 1e6, (rho[sel] - ref) * 1e6, color=col, lw=2, alpha=0.6)
        ax.plot(np.degrees(th[sel]), (r[sel] - ref) * 1e6, "o", ms=3, color=col,
                label=f"region {j}: {int(sel.sum())} points")
        k = int(np.asarray(regions.index)[j])
        d = float(np.asarray(regions.depth)[j])
        ax.annotate(f"δ = {d * 1e6:.2f} µm", (np.degrees(th[k]), (r[k] - ref) * 1e6), fontsize=7,
                    xytext=(0, -14), textcoords="offset points", ha="center", color=col)
    ax.set_xlabel("polar angle θ [deg]")
    ax.set_ylabel(f"radius − {ref * 1e3:.4g} mm [µm]")
    ax.set_xlim(np.degrees(lo), np.degrees(lo) + 360)
    m = np.asarray(regions.mask)
    top = max(r.max(), rho[m].max() if m.any() else r.max()) - ref
    span = max(top - (r.min() - ref), 1e-7)
    ax.set_ylim((r.min() - ref - 0.25 * span) * 1e6, (top + 0.25 * span) * 1e6)
    n = int(np.asarray(regions.n_regions))
    ax.set_title(title or f"{n} contact region{'s' if n != 1 else ''}", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    return ax


def _n_ticks(ax, n):
    """Major ticks at the N values themselves, no minor labels (log x axis)."""
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks([float(v) for v in n], [f"{int(v)}" for v in n])


def error_vs_points(ax, n_points, errors, orders=(2, 4)):
    """Relative (or absolute) error against the number of profile points N on log–log axes, one
    line per {label: errors}; dashed reference slopes N^−order through the first point of the
    first line."""
    n = np.asarray(n_points, float)
    for lab, e in errors.items():
        ax.loglog(n, np.asarray(e, float), "o-", ms=4, label=lab)
    first = np.asarray(next(iter(errors.values())), float)
    for q in orders:
        ax.loglog(n, first[0] * (n / n[0]) ** (-q), "k:", lw=0.8)
        ax.annotate(f"N$^{{-{q}}}$", (n[-1], first[0] * (n[-1] / n[0]) ** (-q)), fontsize=7)
    _n_ticks(ax, n)
    ax.set_xlabel("profile points N [-]")
    ax.set_ylabel("depth error |δ_N − δ_ref| / δ_ref [-]")
    ax.legend(fontsize=7)
    return ax


def cost_vs_points(ax, n_points, seconds, per="call", unit="µs"):
    """Measured time per ``per`` [µs] against N (log–log), one line per {label: seconds}."""
    scale = {"s": 1.0, "ms": 1e3, "µs": 1e6}[unit]
    for lab, s in seconds.items():
        ax.loglog(np.asarray(n_points, float), np.asarray(s, float) * scale, "s-", ms=4, label=lab)
    _n_ticks(ax, n_points)
    ax.set_xlabel("profile points N [-]")
    ax.set_ylabel(f"time per {per} [{unit}]")
    ax.legend(fontsize=7)
    return ax


def gradient_comparison(ax, keys, autodiff, finite_difference, values=None, metric=None):
    """Autodiff against central finite-difference derivatives, one pair of bars per key.

    With ``values`` (the parameter values θ) and ``metric`` (the metric value M) the bars are the
    normalised sensitivities (θ/M)·∂M/∂θ [-], comparable across keys of different units; else
    the raw derivatives.  The relative difference |AD − FD|/|AD| is written above each pair."""
    ad = np.asarray(autodiff, float)
    fd = np.asarray(finite_difference, float)
    scale = np.asarray(values, float) / float(metric) if values is not None and metric is not None else np.ones_like(ad)
    y = np.arange(len(keys))
    ax.barh(y - 0.2, ad * scale, height=0.4, label="autodiff (jacfwd)")
    ax.barh(y + 0.2, fd * scale, height=0.4, label="central finite difference")
    for i in range(len(keys)):
        rel = abs(ad[i] - fd[i]) / abs(ad[i]) if ad[i] != 0 else np.nan
        ax.annotate(f"rel. diff {rel:.1e}", (max(ad[i] * scale[i], fd[i] * scale[i], 0), y[i]), fontsize=7,
                    xytext=(4, 0), textcoords="offset points", va="center")
    ax.set_yticks(y, keys)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("normalised sensitivity (θ/M)·∂M/∂θ [-]" if values is not None else "∂M/∂θ")
    ax.margins(x=0.25)  # room for the annotations
    ax.legend(fontsize=7, loc="best")
    return ax


def fd_step_study(ax, steps, rel_errors):
    """|AD − FD| / |AD| against the relative finite-difference step h/θ (log–log), one line per
    {key: errors}: truncation error falls as h², round-off and contact-onset jumps rise as h falls."""
    for lab, e in rel_errors.items():
        ax.loglog(np.asarray(steps, float), np.maximum(np.asarray(e, float), 1e-16), "o-", ms=4, label=lab)
    ax.set_xlabel("relative step h / θ [-]")
    ax.set_ylabel("|AD − FD| / |AD| [-]")
    ax.legend(fontsize=7)
    return ax


def tornado(ax, elasticities):
    """Tornado bars of normalised sensitivities {metric: {key: (θ/M)·∂M/∂θ}} [-], keys sorted by
    the magnitude for the first metric (largest on top)."""
    metrics_ = list(elasticities)
    keys = list(elasticities[metrics_[0]])
    order = sorted(keys, key=lambda k: abs(elasticities[metrics_[0]][k]))
    y = np.arange(len(order))
    h = 0.8 / len(metrics_)
    for j, m in enumerate(metrics_):
        ax.barh(y + (j - (len(metrics_) - 1) / 2) * h, [elasticities[m][k] for k in order], height=h, label=m)
    ax.set_yticks(y, order)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("normalised sensitivity (θ/M)·∂M/∂θ [-]")
    ax.legend(fontsize=8)
    return ax


def loss_history(ax, history, kind=""):
    """Loss per optimiser iteration (rows of ``history``: iteration × start), log y axis, the
    best start drawn thick."""
    h = np.asarray(history, float)
    h = h[:, None] if h.ndim == 1 else h
    best = int(np.nanargmin(h[-1]))
    for j in range(h.shape[1]):
        ax.semilogy(h[:, j], lw=2 if j == best else 0.8, label=f"start {j}" + (" (best)" if j == best else ""))
    ax.set_xlabel("iteration [-]")
    ax.set_ylabel(f"loss{f' ({kind})' if kind else ''} [-]")
    ax.legend(fontsize=7)
    return ax


def identification_fit(ax, t, measured, initial, fitted, signal="slider_acceleration_m_per_s2"):
    """Measured signal (dots), the model at the initial guess (dashed) and at the identified
    parameters, against time [ms]."""
    t = np.asarray(t, float) * 1e3
    ax.plot(t, measured, ".", ms=2, color="0.45", label="noisy measurement")
    ax.plot(t, initial, "--", lw=1, label="model at initial guess")
    ax.plot(t, fitted, lw=1.2, label="model at identified parameters")
    ax.set_xlabel("time t [ms]")
    name, unit = _name_unit(signal)
    ax.set_ylabel(f"{name} [{unit}]")
    ax.legend(fontsize=7)
    return ax
