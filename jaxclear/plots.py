"""Plots shared by the CLI and the notebooks (matplotlib, Agg backend for files)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

if "ipykernel" not in __import__("sys").modules:
    matplotlib.use("Agg")
import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402


def _label(col):
    """'rod youngs modulus' from 'rod.youngs_modulus' (a linkage's entry and key)."""
    return col.replace(".", " ").replace("_", " ")


def pick_variants(table, n):
    """Indices of n variants spread over the sweep (by clearance when it is swept)."""
    B = len(table["finite"])
    key = "clearance_m" if "clearance_m" in table else None
    order = np.argsort(table[key]) if key else np.arange(B)
    return [int(order[i]) for i in np.unique(np.linspace(0, B - 1, min(n, B)).round().astype(int))]


def _fmt_value(col, v):
    """'clearance 0.1 mm' from ('clearance_m', 1e-4): lengths in mm, speeds as integers."""
    name, unit = _name_unit(col)
    v = float(v)
    if unit == "m":
        v, unit = v * 1e3, "mm"
    return f"{name} {_num(v)}" + ("" if unit == "-" else f" {unit}")


def variant_label(table, axes, i):
    """'#66: clearance 0.1 mm, crank speed 3000 rpm, wear depth 0.025 mm': every swept value."""
    vals = [_fmt_value(a, table[a][i]) for a in axes if a in table]
    return f"#{i}" + (": " + ", ".join(vals) if vals else "")


def _legend_outside(ax, below=False, **kw):
    """Legend off the data: to the right of the axes, or below them (``below``)."""
    if below:
        return ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), borderaxespad=0.0, **kw)
    return ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def _num(v):
    """Integers up to 1e6 as they are (3000 rpm), other values to 3 significant digits (2.07e+11)."""
    v = float(v)
    return f"{v:.0f}" if 1000 <= abs(v) < 1e6 and v == round(v) else f"{v:.3g}"


def sampling_note(t, save_every, block_max):
    """The sentence that says how the histories were sampled."""
    t = np.asarray(t, float)
    dts = float(t[1] - t[0]) if t.size > 1 else float(t[0])
    txt = f"histories saved every {save_every} steps ({dts * 1e6:.3g} µs, dt = {dts / save_every * 1e6:.3g} µs)"
    if block_max:
        txt += f"; solid: maximum over each {save_every}-step block, thin: the sampled value"
    return txt + "; ★ exact peak over every step (metrics.csv)"


def contact_force_vs_crank_angle(ax, hists, idx, table, joint=0, axes=(), peaks=True, legend=True):
    """Contact force [N] against the crank angle [deg] (unwrapped) of chosen variants.

    With the ``contact_force_block_max_N`` channel (maximum over each save block) that curve is
    drawn solid over the thin sampled one, so no impact peak is lost between samples; ★ marks
    each variant's exact peak ``peak_contact_force_N`` (metrics.csv, every step; for several joints
    the maximum over them, so it is marked on the joint where it occurs).  Without the channel
    the exact peak is drawn as a level (dotted) where the samples missed it.  Returns {variant: (crank angle [deg], exact peak [N])} of the markers."""
    bm = hists.get("contact_force_block_max_N")
    marks = {}
    for i in idx:
        th = np.degrees(np.unwrap(hists["crank_angle_rad"][i]))
        f = np.asarray(hists["contact_force_N"][i])[..., joint]
        lab = variant_label(table, axes, i)
        if bm is None:
            (line,) = ax.plot(th, f, lw=0.8, label=lab)
            k = int(np.nanargmax(f))
        else:
            fb = np.asarray(bm[i])[..., joint]
            (line,) = ax.plot(th, fb, lw=0.9, label=lab)
            ax.plot(th, f, lw=0.5, alpha=0.5, color=line.get_color())
            k = int(np.nanargmax(fb))
        exact = float(table["peak_contact_force_N"][i]) if (peaks and "peak_contact_force_N" in table) else None
        seen = float(np.nanmax(fb if bm is not None else f))
        col = line.get_color()
        if exact is None or not np.isfinite(exact):
            continue
        if bm is not None and abs(seen - exact) <= 1e-9 * max(abs(exact), 1.0):
            # the block maximum reaches the exact peak: mark it where it happened
            ax.plot(th[k], exact, "*", ms=10, color=col, mec="k", mew=0.5)
            ax.annotate(
                f"{exact / 1e3:.3g} kN",
                (th[k], exact),
                xytext=(5, -3),
                textcoords="offset points",
                fontsize=7,
                color=col,
            )
            marks[i] = (float(th[k]), exact)
        elif bm is None and exact > seen:
            # peak between the samples (no block-max channel): its level, not a guessed place
            ax.axhline(exact, ls=":", lw=0.8, color=col)
            ax.annotate(
                f"★ exact peak {exact / 1e3:.3g} kN (between samples)",
                (1.0, exact),
                xycoords=("axes fraction", "data"),
                xytext=(-4, 2),
                textcoords="offset points",
                ha="right",
                va="bottom",
                fontsize=7,
                color=col,
            )
            marks[i] = (None, exact)
        ax.set_ylim(top=max(ax.get_ylim()[1], exact * 1.12))
    ax.set_xlabel("crank angle [deg]")
    ax.set_ylabel("contact force [N]")
    if legend:
        _legend_outside(ax)
    return marks


def bore_boundaries(spec, table, idx, axis_paths=()):
    """{variant: (x, y)} of the journal-centre limit of each variant's own bore, normalised by its
    clearance c: the radial offset r_b(θ) − R_j of the bushing profile (the clearance circle
    for a circular bore; the wear of a worn bore shows as the bulge beyond 1).  None when the
    spec has no bushing profile."""
    if "profile" not in spec or "joint" not in spec:
        return None
    th = np.linspace(0, 2 * np.pi, 361)
    circle = (np.cos(th), np.sin(th))
    if spec["profile"].get("kind", "circle") == "circle":
        return {i: circle for i in idx}
    import jax
    import jax.numpy as jnp

    from . import spec as specmod
    from .mechanisms import _clearance

    base = {f"{s}.{k}": v for s in ("joint", "profile", "laws") for k, v in spec[s].items()}
    swept = {
        pth: np.array([float(table[specmod.column_name(pth)][i]) for i in idx])
        for pth in axis_paths
        if specmod.column_name(pth) in table
    }
    fixed = {k: v for k, v in base.items() if k not in swept}
    n = int(spec["profile"].get("n_points") or 0) or 360

    def one(sw):  # the joint's own profile builder, once jitted over the plotted variants
        flat = {**fixed, **sw}
        rj = jnp.asarray(flat["joint.journal_radius_m"], jnp.float64)
        c = jnp.asarray(flat["joint.clearance_m"], jnp.float64)
        pts = _clearance.profile_points(spec, flat, rj + c, n, jnp.float64)
        r = jnp.hypot(pts[:, 0], pts[:, 1])
        return pts * ((r - rj) / r / c)[:, None]

    b = (
        np.asarray(jax.jit(jax.vmap(one))({k: jnp.asarray(v) for k, v in swept.items()}))
        if swept
        else np.broadcast_to(np.asarray(jax.jit(one)({})), (len(idx), n, 2))
    )
    return {i: (np.append(b[k, :, 0], b[k, 0, 0]), np.append(b[k, :, 1], b[k, 0, 1])) for k, i in enumerate(idx)}


def joint_clearance(spec, table, joint):
    """Each variant's radial clearance [m] of clearance joint ``joint``: its own swept or given
    value (``joints.<joint>.clearance_m``, column ``<joint>.clearance_m``), else the shared one
    (column ``clearance_m`` or ``joint.clearance_m``)."""
    n = len(next(iter(table.values())))
    for col in (f"{joint}.clearance_m", "clearance_m"):
        if col in table:
            return np.asarray(table[col], float)
    own = (spec.get("joints", {}).get(joint) or {}).get("clearance_m") if isinstance(spec.get("joints"), dict) else None
    return np.full(n, float(own if own is not None else spec["joint"]["clearance_m"]))


def orbits(ax, hists, idx, table, clearance=None, joint=0, axes=(), bores=None):
    """Journal-centre orbits in the bearing frame, normalised by the clearance; each variant's own
    bore limit (``bore_boundaries``) dashed in its colour, else the clearance circle."""
    th = np.linspace(0, 2 * np.pi, 200)
    if not bores:
        ax.plot(np.cos(th), np.sin(th), "k--", lw=0.8, label="clearance circle")
    for i in idx:
        c = table["clearance_m"][i] if "clearance_m" in table else clearance
        x = hists["journal_x_m"][i][..., joint] / c
        y = hists["journal_y_m"][i][..., joint] / c
        (line,) = ax.plot(x, y, lw=0.6, label=variant_label(table, axes, i))
        if bores:
            ax.plot(*bores[i], "--", lw=1.0, color=line.get_color())
    if bores:
        ax.plot([], [], "k--", lw=1.0, label="each variant's bore (dashed)")
    ax.set_aspect("equal")
    ax.set_xlabel("x / c [-]")
    ax.set_ylabel("y / c [-]")
    _legend_outside(ax, below=True)


def orbit_figure(hists, idx, table, clearance=None, axes=(), bores=None, title="", note=""):
    """The orbit figure: square data axes, the legend right below them and the sampling ``note``
    right below the legend (anchored to it, whatever its height), for a ``bbox_inches="tight"``
    save, which trims the figure to them: no blank band between the plot, the legend and the note."""
    fig, ax = plt.subplots(figsize=(6.4, 6.4))
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.1, top=0.94)
    orbits(ax, hists, idx, table, clearance, axes=axes, bores=bores)
    if title:
        ax.set_title(title, fontsize=10)
    # the legend's top 4 pt under the x label, measured: with equal aspect the axes' height (and
    # so any offset in axes fractions) depends on the data's extent
    fig.canvas.draw()
    below = ax.xaxis.get_tightbbox(fig.canvas.get_renderer()).y0 - 4 * fig.dpi / 72
    leg = ax.get_legend()
    leg.set_bbox_to_anchor((0.5, ax.transAxes.inverted().transform((0.0, below))[1]), transform=ax.transAxes)
    if note:
        # x in axes fractions (left edge of the axes), y just under the legend's bottom edge
        ax.annotate(
            note,
            xy=(0.0, 0.0),
            xycoords=("axes fraction", leg),
            xytext=(0, -6),
            textcoords="offset points",
            ha="left",
            va="top",
            fontsize=7,
            annotation_clip=False,
        )
    return fig


def _edges(u, log):
    """Cell edges around sorted centres u: midpoints inside, half a step beyond the ends
    (in log space when ``log``)."""
    v = np.log(u) if log else np.asarray(u, float)
    if v.size == 1:
        e = np.array([v[0] - 0.5, v[0] + 0.5]) if not log else np.array([v[0] - 0.1, v[0] + 0.1])
        return np.exp(e) if log else e
    mid = 0.5 * (v[1:] + v[:-1])
    e = np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])
    return np.exp(e) if log else e


def _is_log(u):
    u = np.unique(np.asarray(u, float))
    return u.size > 2 and u.min() > 0 and u.max() / u.min() > 20


def value_ticks(axis, values, log, max_ticks=5):
    """Ticks at (a thinned subset of) the swept values, labelled with 3 significant digits and
    no minor labels: no overlapping ``2×10⁻⁵ 3×10⁻⁵`` log labels."""
    u = np.unique(np.asarray(values, float))
    step = int(np.ceil(u.size / max_ticks))
    ticks = u[::step]
    axis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    axis.set_major_formatter(matplotlib.ticker.FixedFormatter([_num(v) for v in ticks]))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    if axis.axis_name == "x" and max(len(_num(v)) for v in ticks) * len(ticks) > 24:
        axis.set_tick_params(labelrotation=30)
    if log:
        axis.set_minor_locator(matplotlib.ticker.NullLocator())


def _grid(table, xkey, ykey, zkey, rows):
    x = np.asarray(table[xkey], float)[rows]
    y = np.asarray(table[ykey], float)[rows]
    z = np.asarray(table[zkey], float)[rows]
    ux, uy = np.unique(x), np.unique(y)
    grid = np.full((uy.size, ux.size), np.nan)
    count = np.zeros(grid.shape, int)
    for xi, yi, zi in zip(x, y, z):
        j, i = np.searchsorted(ux, xi), np.searchsorted(uy, yi)
        grid[i, j] = np.nanmax([grid[i, j], zi])
        count[i, j] += 1
    return ux, uy, grid, count


def _norm(z):
    z = np.asarray(z, float)
    z = z[np.isfinite(z)]
    if z.size and z.min() > 0 and z.max() / z.min() > 100:
        return matplotlib.colors.LogNorm(z.min(), z.max())
    return matplotlib.colors.Normalize(z.min() if z.size else 0, z.max() if z.size else 1)


def _colorbar(fig, im, axs, title):
    cb = fig.colorbar(im, ax=axs, shrink=0.9)
    cb.set_label(title, fontsize=9)
    if isinstance(im.norm, matplotlib.colors.LogNorm):
        cb.ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        cb.ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        cb.ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    return cb


def amplification_map(ax, table, xkey, ykey, zkey, rows=None, norm=None, colorbar=True, annotate=True):
    """A metric over two swept axes (rows: the variants to use, default all): pcolormesh on a
    full grid (cells holding several variants show their maximum, said in the colour-bar title),
    scatter otherwise; cell values written in the cells of small grids.  Returns the artist."""
    rows = np.arange(len(table[xkey])) if rows is None else np.asarray(rows)
    x, y, z = (np.asarray(table[k], float)[rows] for k in (xkey, ykey, zkey))
    ux, uy, grid, count = _grid(table, xkey, ykey, zkey, rows)
    logx, logy = _is_log(ux), _is_log(uy)
    norm = norm or _norm(z)
    if ux.size * uy.size <= len(x):
        im = ax.pcolormesh(_edges(ux, logx), _edges(uy, logy), grid, shading="flat", norm=norm)
        if annotate and grid.size <= 30:  # (text is the costly artist: small grids only)
            for (a, b), v in np.ndenumerate(grid):
                if np.isfinite(v):
                    lum = np.mean(im.cmap(norm(v))[:3])
                    ax.text(
                        ux[b], uy[a], f"{v:.3g}", ha="center", va="center", fontsize=6, color="k" if lum > 0.5 else "w"
                    )
    else:
        im = ax.scatter(x, y, c=z, s=12, norm=norm)
        count = np.array([2])
    for axis, u, lg, sc in ((ax.xaxis, ux, logx, ax.set_xscale), (ax.yaxis, uy, logy, ax.set_yscale)):
        if lg:
            sc("log")
        value_ticks(axis, u, lg)
    ax.set_xlabel("{} [{}]".format(*_name_unit(xkey)))
    ax.set_ylabel("{} [{}]".format(*_name_unit(ykey)))
    if colorbar:
        title = _label(zkey) + (" (max over the other axes)" if count.max() > 1 else "")
        _colorbar(ax.figure, im, ax, title)
    return im


def amplification_maps(table, xkey, ykey, zkey, facet=None, title=""):
    """A figure of ``amplification_map`` panels, one per value of the ``facet`` column (small
    multiples, one shared colour scale), or one panel without it."""
    vals = np.unique(np.asarray(table[facet], float)) if facet else [None]
    n = len(vals)
    ncol = int(np.ceil(np.sqrt(n)))
    nrow = int(np.ceil(n / ncol))
    fig, axs = plt.subplots(
        nrow, ncol, figsize=(4.2 * ncol + 1.4, 3.4 * nrow + 1.2), squeeze=False, sharex=True, sharey=True
    )
    # fixed margins: constrained layout cost ~2 s per figure (text extents of every tick)
    fig.subplots_adjust(
        left=0.75 / (4.2 * ncol + 1.4),
        right=0.86,
        bottom=1.0 / (3.4 * nrow + 1.2),
        top=1 - 0.55 / (3.4 * nrow + 1.2),
        wspace=0.08,
        hspace=0.25,
    )
    norm = _norm(table[zkey])
    im = None
    for k, v in enumerate(vals):
        ax = axs.flat[k]
        rows = np.arange(len(table[zkey])) if v is None else np.nonzero(np.asarray(table[facet], float) == v)[0]
        im = amplification_map(ax, table, xkey, ykey, zkey, rows=rows, norm=norm, colorbar=False)
        if v is not None:
            ax.set_title(_fmt_value(facet, v), fontsize=9)
        if k % ncol:
            ax.set_ylabel("")
        if k < n - ncol:
            ax.set_xlabel("")
    for ax in list(axs.flat)[n:]:
        ax.set_visible(False)
    multi = any(
        _grid(
            table,
            xkey,
            ykey,
            zkey,
            np.arange(len(table[zkey])) if v is None else np.nonzero(np.asarray(table[facet], float) == v)[0],
        )[3].max()
        > 1
        for v in vals
    )
    _colorbar(fig, im, axs, _label(zkey) + (" (max over the other axes)" if multi else ""))
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


DAF_LABEL = "dynamic amplification factor DAF = (max clearance − max ideal) / max ideal [-]"


def sweep_plots(
    outdir, table, summary, hists, t, spec, amplified=("contact_force", "slider_acceleration"), axis_paths=None
):
    """Write the standard PNGs of a sweep into outdir/plots; return their relative paths.
    amplified: the quantities whose DAF columns are mapped over the axes (the table leads with
    DAF, so the figures do too)."""
    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    written = []
    idx = pick_variants(table, int(spec["outputs"]["plot_variants"]))
    clearance = spec["joint"]["clearance_m"]
    axes = list(summary["axes"])
    if axis_paths is None:
        from . import spec as specmod

        axis_paths = [a["path"] for a in specmod.parse_axes(spec)]
    save_every = int(summary.get("save_every") or spec["integrator"]["save_every"])
    name = summary["name"]
    if "contact_force_N" in hists and "crank_angle_rad" in hists:
        nj = np.asarray(hists["contact_force_N"]).shape[-1] if np.ndim(hists["contact_force_N"]) == 3 else 1
        joints_ = list(summary.get("joints") or [summary.get("clearance_joint", "clearance")] * nj)
        # one panel per plotted variant (own force scale: a 2 kN variant next to a 50 kN one
        # would be a flat line), one column per joint
        nv = len(idx)
        h = 1.9 * nv + 0.9
        fig, axs = plt.subplots(nv, nj, figsize=(9 * nj, h), squeeze=False)
        fig.subplots_adjust(left=0.08 / nj, right=0.99, bottom=0.65 / h, top=1 - 0.62 / h, hspace=0.55, wspace=0.15)
        for r, i in enumerate(idx):
            for j in range(nj):
                ax = axs[r, j]
                contact_force_vs_crank_angle(ax, hists, [i], table, joint=j, axes=axes, legend=False)
                ax.set_title(variant_label(table, axes, i), fontsize=8)
                ax.set_ylabel("force [N]", fontsize=8)
                ax.tick_params(labelsize=7)
                if r < nv - 1:
                    ax.set_xlabel("")
        fig.suptitle(f"{name}: contact force at the " + " / ".join(f"{j} joint" for j in joints_[:nj]), fontsize=10)
        fig.text(
            0.01, 0.01, sampling_note(t, save_every, "contact_force_block_max_N" in hists), fontsize=7, va="bottom"
        )
        fig.savefig(pdir / "contact_force_vs_crank_angle.png", dpi=110)
        plt.close(fig)
        written.append("plots/contact_force_vs_crank_angle.png")
    if "journal_x_m" in hists and "journal_y_m" in hists:
        try:
            bores = bore_boundaries(spec, table, idx, axis_paths)
        except Exception:  # noqa: BLE001  (a profile the helper cannot rebuild: the nominal circle)
            bores = None
        jn = (summary.get("joints") or [summary.get("clearance_joint", "")])[0]
        tt = np.asarray(t, float)
        dts = float(tt[1] - tt[0]) if tt.size > 1 else float(tt[0])
        tab = {**table, "clearance_m": joint_clearance(spec, table, jn)}  # the plotted joint's own
        fig = orbit_figure(
            hists,
            idx,
            tab,
            clearance,
            axes=axes,
            bores=bores,
            title=f"{name}: journal-centre orbits / clearance" + (f" ({jn} joint)" if jn else ""),
            note=f"orbit points every {save_every} steps ({dts * 1e6:.3g} µs): straight segments "
            "are the sampling, not the motion",
        )
        fig.savefig(pdir / "journal_orbits.png", dpi=110, bbox_inches="tight", pad_inches=0.08)
        plt.close(fig)
        written.append("plots/journal_orbits.png")
    if len(axes) >= 2:
        for z in tuple(f"daf_{a}_steady" for a in amplified):
            if z not in table:
                continue
            fig = amplification_maps(
                table,
                axes[0],
                axes[1],
                z,
                facet=axes[2] if len(axes) >= 3 else None,
                title=f"{name}: {_label(z)} (DAF, steady window)",
            )
            fig.savefig(pdir / f"map_{z}.png", dpi=110)
            plt.close(fig)
            written.append(f"plots/map_{z}.png")
    elif len(axes) == 1:
        fig, ax = plt.subplots(figsize=(9, 4.3))
        fig.subplots_adjust(left=0.08, right=0.7, bottom=0.24, top=0.9)
        x = np.asarray(table[axes[0]], float)
        o = np.argsort(x)
        for z in (f"daf_{amplified[0]}", f"daf_{amplified[0]}_steady", f"daf_{amplified[1]}_steady"):
            if z in table:
                ax.plot(x[o], np.asarray(table[z], float)[o], "o-", label=z)
        ax.set_xlabel("{} [{}]".format(*_name_unit(axes[0])))
        ax.set_ylabel("DAF [-]")
        ax.set_title(f"{name}: {DAF_LABEL}", fontsize=8)
        lg = _is_log(x)
        if lg:
            ax.set_xscale("log")
        value_ticks(ax.xaxis, x, lg)
        _legend_outside(ax)
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


_UNITS = (
    ("_m2_per_N", "m²/N"),
    ("_N_m", "N·m"),
    ("_m_per_s2", "m/s²"),
    ("_m_per_s", "m/s"),
    ("_rad_per_s2", "rad/s²"),
    ("_rad_per_s", "rad/s"),
    ("_rpm", "rpm"),
    ("_Pa", "Pa"),
    ("_kg_m2", "kg·m²"),
    ("_kg", "kg"),
    ("_N", "N"),
    ("_rad", "rad"),
    ("_deg", "°"),
    ("_m", "m"),
    ("_s", "s"),
)


def _name_unit(col):
    """('peak contact force steady', 'N') from 'peak_contact_force_steady_N'; unit '-' without
    a unit suffix (amplification factors, ratios)."""
    for suf, unit in _UNITS:
        if col.endswith(suf):
            return _label(col[: -len(suf)]), unit
    return _label(col), "-"


def _fmt_group(keys, vals):
    return ", ".join(f"{_name_unit(k)[0]} = {v:g} {_name_unit(k)[1]}".replace(" -", "") for k, v in zip(keys, vals))


def peak_vs_clearance(
    ax,
    table,
    metric="peak_contact_force_steady_N",
    ideal="ideal_peak_reaction_steady_N",
    by=("crank_speed_rpm", "restitution"),
):
    """A peak metric against the clearance on log–log axes, one line per combination of the
    ``by`` columns; the ideal (no-clearance) peak of each group dashed in the same colour.
    Clearance in mm on the x axis, the metric's unit from its column name."""
    keys = [k for k in by if k in table]
    c = np.asarray(table["clearance_m"], float)
    for vals, rows in _groups(table, keys):
        rows = rows[np.argsort(c[rows])]
        (line,) = ax.plot(
            c[rows] * 1e3,
            np.asarray(table[metric], float)[rows],
            "o-",
            ms=3,
            lw=1,
            label=_fmt_group(keys, vals) or metric,
        )
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
            ax.plot(
                c[rows] * 1e3,
                np.asarray(table[mode], float)[rows],
                styles[g % 4],
                marker=markers[(g // 4) % 6],
                ms=3,
                lw=1,
                color=cols(m),
                label=(_label(mode.removesuffix("_fraction")) if g == 0 else None),
            )
        ax.plot(
            [], [], styles[g % 4], marker=markers[(g // 4) % 6], color="k", lw=1, ms=3, label=_fmt_group(keys, vals)
        )
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
        ax.plot(
            np.append(th[o], th[o][0] + 360),
            np.append(r[o], r[o][0]) * 1e6 - ref_radius * 1e6,
            lw=1,
            label=f"{name} (N = {len(p)})",
        )
    ax.set_xlabel("polar angle θ [deg]")
    ax.set_ylabel(f"r(θ) − {ref_radius * 1e3:.4g} mm [µm]")
    ax.set_xlim(0, 360)
    ax.legend(fontsize=7)
    return ax


def _pin_surface_radius(theta, center, radius):
    """Distance from the bushing origin to the pin surface along the ray θ (origin inside the pin):
    ρ = c·u + sqrt(R² − |c|² + (c·u)²), u = (cos θ, sin θ)."""
    cu = center[0] * np.cos(theta) + center[1] * np.sin(theta)
    return cu + np.sqrt(np.maximum(radius**2 - center[0] ** 2 - center[1] ** 2 + cu**2, 0.0))


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
    ax.plot(
        np.degrees(np.append(th[o], th[o][0] + 2 * np.pi)),
        (np.append(r[o], r[o][0]) - ref) * 1e6,
        "k-",
        lw=0.9,
        label=f"bushing profile (N = {len(p)})",
    )
    ax.plot(np.degrees(ths), (_pin_surface_radius(ths, c, R) - ref) * 1e6, color="0.55", lw=0.9, label="pin surface")
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
        ax.plot(
            np.degrees(th[sel]),
            (r[sel] - ref) * 1e6,
            "o",
            ms=3,
            color=col,
            label=f"region {j}: {int(sel.sum())} points",
        )
        k = int(np.asarray(regions.index)[j])
        d = float(np.asarray(regions.depth)[j])
        ax.annotate(
            f"δ = {d * 1e6:.2f} µm",
            (np.degrees(th[k]), (r[k] - ref) * 1e6),
            fontsize=7,
            xytext=(0, -14),
            textcoords="offset points",
            ha="center",
            color=col,
        )
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
        ax.annotate(
            f"rel. diff {rel:.1e}",
            (max(ad[i] * scale[i], fd[i] * scale[i], 0), y[i]),
            fontsize=7,
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
        )
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
        bars = ax.barh(y + (j - (len(metrics_) - 1) / 2) * h, [elasticities[m][k] for k in order], height=h, label=m)
        ax.bar_label(bars, fmt="%.3g", fontsize=7, padding=2)  # every bar's value, a tiny one too
    ax.set_yticks(y, order)
    ax.axvline(0, color="k", lw=0.8)
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo - 0.12 * (hi - lo) * (lo < 0), hi + 0.12 * (hi - lo))  # room for the labels
    ax.set_xlabel("normalised sensitivity (θ/M)·∂M/∂θ [-]")
    _legend_outside(ax)  # right of the bars (saved with bbox_inches="tight")
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


def versus_ideal(mech, outdir, spec, table, summary, hists, t, chans, filename, title):
    """Saved channels over the last crank revolution(s) (the steady window of the spec's base values)
    against the mechanism's ideal twin (``mech.ideal``): one panel per (channel, ideal key, label)
    of ``chans``; the ideal key "reaction" is the first clearance joint's reaction [N]."""
    import jax
    import jax.numpy as jnp

    from . import spec as specmod

    first = mech.joints[spec["model"]["clearance_joint"]][0]
    chans = [(c, f"reaction_{first}" if k == "reaction" else k, lab) for c, k, lab in chans if c in hists]
    if not chans or "crank_angle_rad" not in hists:
        return []
    t = np.asarray(t)
    flat = specmod.flat_values(spec)
    cfg = mech.make_config(spec, float(t[-1]))
    p = mech.params(spec, cfg, flat, jnp.float64, float(t[-1]))
    tt = np.linspace(float(p.steady_start), float(t[-1]), 4001)
    ide = {
        k: np.asarray(v) for k, v in jax.jit(mech.ideal)(p, jnp.asarray(tt)).items()
    }  # jit: eager vmap took ~8 s more
    deg = lambda th: np.degrees(np.mod(th, 2 * np.pi))
    idx = pick_variants(table, int(spec["outputs"]["plot_variants"]))
    fig, axs = plt.subplots(len(chans), 1, figsize=(8, 2.6 * len(chans)), sharex=True)
    axs = np.atleast_1d(axs)
    order = np.argsort(deg(ide["theta"]))
    for ax, (ch, key, lab) in zip(axs, chans):
        for i in idx:
            m = t >= float(p.steady_start)
            th = deg(np.asarray(hists["crank_angle_rad"][i])[m])
            y = np.asarray(hists[ch][i])[m].reshape(m.sum(), -1)[:, 0]
            o = np.argsort(th)
            c = table["clearance_m"][i] if "clearance_m" in table else spec["joint"]["clearance_m"]
            ax.plot(th[o], y[o], lw=0.7, label=f"clearance {c * 1e3:.3g} mm")
        ax.plot(
            deg(ide["theta"])[order],
            (np.abs(ide[key]) if ch == "contact_force_N" else ide[key])[order],
            "k--",
            lw=1.0,
            label="ideal",
        )
        ax.set_ylabel(lab)
    axs[0].legend(fontsize=7)
    axs[0].set_title(f"{summary['name']}: {title}")
    axs[-1].set_xlabel("crank angle [deg]")
    fig.tight_layout()
    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    fig.savefig(pdir / filename, dpi=110)
    plt.close(fig)
    return [f"plots/{filename}"]


def channels_vs_crank_angle(outdir, spec, table, summary, hists, t, channels, filename="histories_vs_crank_angle.png"):
    """Saved scalar channels (one panel each: a body's velocity and acceleration, a link's angular
    acceleration, ...) against the crank angle [deg] over the whole run, every plotted variant
    overlaid with its swept values (as Zheng et al. Figs. 8 and 9); the sampling stated."""
    chans = [c for c in channels if c in hists and np.ndim(hists[c]) == 2]
    if not chans or "crank_angle_rad" not in hists:
        return []
    idx = pick_variants(table, int(spec["outputs"]["plot_variants"]))
    axes = list(summary["axes"])
    fig, axs = plt.subplots(len(chans), 1, figsize=(9, 2.5 * len(chans) + 1.2), sharex=True, squeeze=False)
    for ax, ch in zip(axs[:, 0], chans):
        for i in idx:
            th = np.degrees(np.unwrap(np.asarray(hists["crank_angle_rad"][i])))
            ax.plot(th, np.asarray(hists[ch][i]), lw=0.7, label=variant_label(table, axes, i))
        name, unit = _name_unit(ch)
        ax.set_ylabel(f"{name} [{unit}]", fontsize=8)
        ax.tick_params(labelsize=7)
    axs[-1, 0].set_xlabel("crank angle [deg]")
    _legend_outside(axs[0, 0])
    save_every = int(summary.get("save_every") or spec["integrator"]["save_every"])
    fig.suptitle(f"{summary['name']}: saved histories against the crank angle", fontsize=10)
    fig.text(
        0.01,
        0.01,
        sampling_note(t, save_every, False).split("; ★")[0] + " (no peak between samples shown)",
        fontsize=7,
        va="bottom",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    pdir = Path(outdir) / "plots"
    pdir.mkdir(exist_ok=True)
    fig.savefig(pdir / filename, dpi=110)
    plt.close(fig)
    return [f"plots/{filename}"]


# ---------------------------------------------------------------------------- wear evolution
def _wear_variants(ev, n=4):
    """Up to n variants (finished ones), spread over the sweep."""
    ok = np.nonzero(ev["row_done"].all(axis=0))[0]
    if not len(ok):
        return []
    return [int(ok[i]) for i in np.unique(np.linspace(0, len(ok) - 1, min(n, len(ok))).round().astype(int))]


def _wear_joint(ev, i):
    """The joint of variant i with the deepest final wear (the one its plots show)."""
    d = ev["depth_m"][-1, i]
    return int(np.nanargmax(np.nanmax(d, axis=-1))) if np.isfinite(d).any() else 0


def _cycle_label(ax, cycles):
    ax.set_ylabel("crank cycles")
    if np.nanmax(cycles) >= 1e4:
        ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))


def wear_evolution_plots(outdir, ev, table, spec):
    """plots/wear_profile_polar.png (the worn bushing over the new one, radial clearance in polar
    form), wear_depth_map.png (depth over bushing angle × cycles) and wear_vs_cycles.png (peak
    contact force, largest radial clearance and worn volume against cycles)."""
    pdir = Path(outdir) / "plots"
    pdir.mkdir(parents=True, exist_ok=True)
    idx = _wear_variants(ev, spec.get("outputs", {}).get("plot_variants", 4) or 4)
    if not idx:
        return []
    axes = list(ev["inputs"])
    inputs = {**ev["inputs"]}
    U1 = ev["depth_m"].shape[0]
    cycles = np.arange(U1)[:, None] * ev["cycles_per_update"][None, :]
    names = ev["attrs"]["joints"]
    rj = ev["journal_radius_m"]
    written = []

    # -- polar profiles
    fig, axs = plt.subplots(
        1,
        len(idx),
        subplot_kw={"projection": "polar"},
        figsize=(4.6 * len(idx) + 1.2, 4.6),
        squeeze=False,
        gridspec_kw={"wspace": 0.45},
    )
    rows = np.unique(np.linspace(0, U1 - 1, min(U1, 6)).round().astype(int))
    cmap = plt.get_cmap("viridis")
    norm = matplotlib.colors.Normalize(0, np.nanmax(cycles[:, idx]))
    for ax, i in zip(axs[0], idx):
        j = _wear_joint(ev, i)
        p0 = ev["points0_m"][i, j]
        th = np.arctan2(p0[:, 1], p0[:, 0])
        o = np.argsort(th)
        for m in rows:
            r0 = np.linalg.norm(p0, axis=-1)
            r = (r0 + ev["depth_m"][m, i, j] - rj[i, j]) * 1e6
            ax.plot(
                np.r_[th[o], th[o][0]],
                np.r_[r[o], r[o][0]],
                color=cmap(norm(cycles[m, i])),
                lw=2.0 if m == 0 else 1.2,
                ls="--" if m == 0 else "-",
            )
        ax.set_rlabel_position(112.5)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g} µm"))
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4))
        ax.tick_params(labelsize=7)
        ax.set_title(
            variant_label(inputs, axes, i) + (f"\njoint {names[j]}" if len(names) > 1 else ""), fontsize=8, pad=14
        )
    sm = matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap)
    cb = fig.colorbar(sm, ax=axs[0].tolist(), shrink=0.8, pad=0.08)
    cb.set_label("crank cycles (dashed: new bushing)")
    fig.suptitle("radial clearance r(θ) − R_J [µm] of the bushing as it wears (bearing frame)", fontsize=10)
    fig.savefig(pdir / "wear_profile_polar.png", dpi=110, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    written.append("plots/wear_profile_polar.png")

    # -- depth map
    fig, axs = plt.subplots(1, len(idx), figsize=(4.4 * len(idx) + 1.0, 3.8), squeeze=False, sharey=True)
    vmax = np.nanmax(ev["depth_m"][:, idx]) * 1e6
    for ax, i in zip(axs[0], idx):
        j = _wear_joint(ev, i)
        p0 = ev["points0_m"][i, j]
        th = np.degrees(np.arctan2(p0[:, 1], p0[:, 0]))
        o = np.argsort(th)
        d = ev["depth_m"][:, i, j][:, o] * 1e6
        im = ax.pcolormesh(th[o], cycles[:, i], d, shading="nearest", cmap="magma", vmin=0, vmax=vmax)
        k = int(np.nanargmax(d[-1]))
        ax.plot(th[o][k], cycles[-1, i], "c^", ms=7, clip_on=False)
        ax.annotate(
            f"deepest {d[-1, k]:.3g} µm at {th[o][k]:.0f}°",
            (th[o][k], cycles[-1, i]),
            xytext=(0.5, 1.02),
            textcoords="axes fraction",
            ha="center",
            fontsize=7,
            color="k",
        )
        ax.set_xlabel("bushing angle θ [deg] (bearing frame)")
        ax.set_xticks(np.arange(-180, 181, 90))
        ax.set_title(
            variant_label(inputs, axes, i) + (f", joint {names[j]}" if len(names) > 1 else ""), fontsize=8, pad=16
        )
        _cycle_label(ax, cycles[:, i])
    cb = fig.colorbar(im, ax=axs[0].tolist(), shrink=0.9)
    cb.set_label("wear depth h [µm]")
    fig.savefig(pdir / "wear_depth_map.png", dpi=110, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    written.append("plots/wear_depth_map.png")

    # -- force, clearance and volume against cycles
    met = ev["metrics"]
    panels = [
        ("peak_contact_force_steady_N", "peak contact force (steady window) [N]", 1.0),
        ("max_radial_clearance_m", "largest radial clearance [µm]", 1e6),
        ("worn_volume_m3", "worn volume [mm³]", 1e9),
    ]
    panels = [pn for pn in panels if pn[0] in met]
    fig, axs = plt.subplots(len(panels), 1, figsize=(7.8, 2.3 * len(panels) + 0.6), sharex=True, squeeze=False)
    show = _wear_variants(ev, 8)
    for ax, (col, lab, sc) in zip(axs[:, 0], panels):
        for i in show:
            y = met[col][:, i] * sc
            (line,) = ax.plot(cycles[:, i], y, ".-", lw=1.2, ms=4, label=variant_label(inputs, axes, i))
            k = int(np.nanargmax(y))  # the exact peak, labelled inside the axes
            right = k > 0.6 * (len(y) - 1)
            ax.annotate(
                f"{y[k]:.4g}",
                (cycles[k, i], y[k]),
                xytext=(-4 if right else 4, 4),
                textcoords="offset points",
                ha="right" if right else "left",
                fontsize=7,
                color=line.get_color(),
            )
        ax.set_ylabel(lab, fontsize=8)
        ax.margins(y=0.15)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    axs[-1, 0].set_xlabel("crank cycles")
    if np.nanmax(cycles) >= 1e4:
        axs[-1, 0].ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    _legend_outside(axs[0, 0])
    fig.suptitle(f"wear evolution: {len(show)} of {cycles.shape[1]} variants", fontsize=10)
    fig.savefig(pdir / "wear_vs_cycles.png", dpi=110, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    written.append("plots/wear_vs_cycles.png")
    return written
