"""Converters of the operators real models need beyond the zoo's: HardSigmoid, HardSwish,
Resize and Upsample, ConvTranspose.

Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9) become one ``resize`` op whose output
shape and scales the importer resolves from ``scales`` or ``sizes`` (folded tensors; sizes
may be symbolic dims from shape arithmetic), ``axes`` and ``keep_aspect_ratio_policy``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from relaxc.ir import dims as D

from .context import NodeContext, norm_axis, rank_of, shape_of
from .values import Folded, ShapeValue, Value

Converter = Callable[[NodeContext], list]


# -- activations --------------------------------------------------------------------------


def convert_hard_sigmoid(ctx: NodeContext) -> list:
    attrs = {"alpha": float(ctx.attr("alpha", 0.2)), "beta": float(ctx.attr("beta", 0.5))}
    return [ctx.emit("hard_sigmoid", [ctx.input(0)], attrs)]


def convert_hard_swish(ctx: NodeContext) -> list:
    return [ctx.emit("hard_swish", [ctx.input(0)])]


# -- Resize and Upsample -----------------------------------------------------------------


def _present(v: Value | None) -> Value | None:
    """``v``, or None for an absent input or an empty tensor (opset 11's placeholder)."""
    if v is None:
        return None
    if isinstance(v, Folded) and v.array.size == 0:
        return None
    return v


def _floats(ctx: NodeContext, v: Value | None, what: str) -> list[float] | None:
    if v is None:
        return None
    shaping = what == "scales"  # scales set the output's shape; roi does not
    arr = ctx.folded(v, f"its {what} input" if shaping else what, sets_shape=shaping)
    if arr.dtype.kind != "f":
        raise ctx.fail(f"{what} must be floats, got {arr.dtype}")
    return [float(x) for x in arr.reshape(-1)]


def _sizes(ctx: NodeContext, v: Value) -> list[D.Dim]:
    """The ``sizes`` input as dims: folded integers or a shape computed from input dims."""
    if isinstance(v, ShapeValue):
        return list(v.dims)
    ints = ctx.ints(v, "its sizes input", sets_shape=True)
    assert ints is not None
    return list(ints)


def _scaled_dim(ctx: NodeContext, d: D.Dim, scale: float, axis: int) -> D.Dim:
    """floor(d * scale), for a symbolic d only where the scale is a whole number."""
    if D.is_static(d):
        return int(math.floor(int(d) * scale))  # type: ignore[arg-type]
    if scale == 1.0:
        return d
    if scale == int(scale):
        return D.mul(d, int(scale))
    raise ctx.fail(
        f"axis {axis} has the symbolic length {D.dim_to_str(d)}: a scale of {scale} "
        "gives no symbolic output length (give the input a static shape)"
    )


def _check_scales(ctx: NodeContext, scales: Sequence[float]) -> None:
    for s in scales:
        if not s > 0:
            raise ctx.fail(f"every scale must be positive, got {list(scales)}")


def _resolve(
    ctx: NodeContext,
    shape: tuple[D.Dim, ...],
    scales: list[float] | None,
    sizes: list[D.Dim] | None,
    axes: list[int] | None,
    policy: str,
) -> tuple[tuple[D.Dim, ...], tuple[float, ...] | None]:
    """The output shape over every axis and the per-axis scales (None: output / input)."""
    rank = len(shape)
    if (scales is None) == (sizes is None):
        raise ctx.fail("needs exactly one of scales and sizes")
    given = scales if scales is not None else sizes
    assert given is not None
    axes = list(range(rank)) if axes is None else [norm_axis(a, rank, ctx) for a in axes]
    if len(set(axes)) != len(axes):
        raise ctx.fail(f"axes {axes} repeat an axis")
    if len(given) != len(axes):
        what = "scales" if scales is not None else "sizes"
        raise ctx.fail(f"{what} has {len(given)} values for {len(axes)} axes")
    if scales is not None:
        _check_scales(ctx, scales)
        full = [1.0] * rank
        for a, s in zip(axes, scales):
            full[a] = s
        out = tuple(_scaled_dim(ctx, d, s, a) for a, (d, s) in enumerate(zip(shape, full)))
        return out, tuple(full)
    assert sizes is not None
    out_l = list(shape)
    for a, n in zip(axes, sizes):
        out_l[a] = n
    if policy == "stretch":
        return tuple(out_l), None
    if policy not in ("not_larger", "not_smaller"):
        raise ctx.fail(f"keep_aspect_ratio_policy '{policy}' is not an ONNX policy")
    ratios = []
    for a in axes:
        if not (D.is_static(shape[a]) and D.is_static(out_l[a])):
            raise ctx.fail(f"keep_aspect_ratio_policy={policy} needs static lengths on axis {a}")
        ratios.append(int(out_l[a]) / int(shape[a]))  # type: ignore[arg-type]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    full = [1.0] * rank
    for a in axes:
        full[a] = scale
        out_l[a] = int(scale * int(shape[a]) + 0.5)  # type: ignore[arg-type]
    return tuple(out_l), tuple(full)


def _full_roi(
    ctx: NodeContext, roi: list[float] | None, rank: int, axes: list[int] | None
) -> tuple[float, ...] | None:
    if roi is None:
        return None
    if axes is None:
        if len(roi) != 2 * rank:
            raise ctx.fail(f"roi has {len(roi)} values; a rank-{rank} input needs {2 * rank}")
        return tuple(roi)
    if len(roi) != 2 * len(axes):
        raise ctx.fail(f"roi has {len(roi)} values; {len(axes)} axes need {2 * len(axes)}")
    full = [0.0] * rank + [1.0] * rank
    for i, a in enumerate(axes):
        a = norm_axis(a, rank, ctx)
        full[a], full[rank + a] = roi[i], roi[len(axes) + i]
    return tuple(full)


def _emit_resize(
    ctx: NodeContext,
    x: Value,
    sizes: tuple[D.Dim, ...],
    scales: tuple[float, ...] | None,
    attrs: dict[str, Any],
) -> list:
    mode = attrs["mode"]
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.fail(f"mode '{mode}' is not a Resize mode (nearest, linear, cubic)")
    dtype = x.type.dtype
    if mode != "nearest" and not dtype.startswith("f"):
        raise ctx.fail(f"{mode} interpolation of {dtype} tensors is not supported (only floats)")
    if mode == "nearest":
        attrs["antialias"] = False  # ONNX: antialias applies to linear and cubic only
    return [ctx.emit("resize", [x], {"sizes": sizes, "scales": scales, **attrs})]


def convert_resize(ctx: NodeContext) -> list:
    x = ctx.input(0, "X")
    rank = rank_of(x)
    mode = str(ctx.attr("mode", "nearest"))
    if ctx.opset < 11:  # Resize-10: X, scales; coordinates as the asymmetric mode, floor
        scales = _floats(ctx, ctx.input(1, "scales"), "scales")
        sizes_in: list[D.Dim] | None = None
        roi = None
        attrs: dict[str, Any] = {
            "mode": mode,
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        }
        axes = None
        policy = "stretch"
    else:
        roi = _floats(ctx, _present(ctx.optional(1)), "roi")
        scales = _floats(ctx, _present(ctx.optional(2)), "scales")
        sizes_v = _present(ctx.optional(3))
        sizes_in = None if sizes_v is None else _sizes(ctx, sizes_v)
        coord = str(ctx.attr("coordinate_transformation_mode", "half_pixel"))
        allowed = {
            "half_pixel",
            "pytorch_half_pixel",
            "align_corners",
            "asymmetric",
            "tf_crop_and_resize",
        }
        allowed |= {"tf_half_pixel_for_nn"} if ctx.opset < 18 else set()
        allowed |= {"half_pixel_symmetric"} if ctx.opset >= 19 else set()
        if coord not in allowed:
            raise ctx.fail(
                f"coordinate_transformation_mode '{coord}' is not one of opset "
                f"{ctx.opset}'s: {', '.join(sorted(allowed))}"
            )
        nearest_mode = str(ctx.attr("nearest_mode", "round_prefer_floor"))
        if nearest_mode not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            raise ctx.fail(f"nearest_mode '{nearest_mode}' is not an ONNX nearest mode")
        attrs = {
            "mode": mode,
            "coordinate_transformation_mode": coord,
            "nearest_mode": nearest_mode,
            "cubic_coeff_a": float(ctx.attr("cubic_coeff_a", -0.75)),
            "exclude_outside": bool(ctx.attr("exclude_outside", 0)),
            "extrapolation_value": float(ctx.attr("extrapolation_value", 0.0)),
            "antialias": bool(ctx.attr("antialias", 0)),
        }
        axes_attr = ctx.attr("axes")
        axes = None if axes_attr is None else [int(a) for a in axes_attr]
        policy = str(ctx.attr("keep_aspect_ratio_policy", "stretch"))
        if coord == "tf_crop_and_resize":
            if roi is None:
                raise ctx.fail("coordinate_transformation_mode tf_crop_and_resize needs roi")
        else:
            roi = None
    sizes, scale_t = _resolve(ctx, shape_of(x), scales, sizes_in, axes, policy)
    attrs["roi"] = _full_roi(ctx, roi, rank, axes)
    return _emit_resize(ctx, x, sizes, scale_t, attrs)


def convert_upsample(ctx: NodeContext) -> list:
    x = ctx.input(0, "X")
    if ctx.opset < 9:
        raw = ctx.attr("scales")
        if raw is None:
            raise ctx.fail("needs the scales attribute")
        scales = [float(s) for s in raw]
    else:
        scales = _floats(ctx, ctx.input(1, "scales"), "scales") or []
    if len(scales) != rank_of(x):
        raise ctx.fail(f"scales has {len(scales)} values for an input of rank {rank_of(x)}")
    if any(s < 1 for s in scales):
        raise ctx.fail(f"Upsample's scales must be at least 1, got {scales}")
    sizes, scale_t = _resolve(ctx, shape_of(x), scales, None, None, "stretch")
    mode = str(ctx.attr("mode", "nearest"))
    if mode == "bilinear":  # Upsample-7's other name of linear
        mode = "linear"
    attrs: dict[str, Any] = {
        "mode": mode,
        "coordinate_transformation_mode": "asymmetric",
        "nearest_mode": "floor",
        "roi": None,
    }
    return _emit_resize(ctx, x, sizes, scale_t, attrs)


# -- ConvTranspose -----------------------------------------------------------------------


def _spatial(ctx: NodeContext, name: str, n: int, default: int) -> list[int]:
    v = ctx.attr(name)
    if v is None:
        return [default] * n
    if len(v) != n:
        raise ctx.fail(f"{name} must have {n} values for a {n}-D ConvTranspose, got {list(v)}")
    return [int(a) for a in v]


def _transpose_pads(
    ctx: NodeContext,
    spatial_in: Sequence[D.Dim],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_pad: list[int],
) -> list[int]:
    """(begins..., ends...) from ``pads``, ``auto_pad`` or ``output_shape`` (ONNX's formulas);
    an end below zero (an output_shape past the full output) becomes output padding."""
    n = len(kernel)
    auto = str(ctx.attr("auto_pad", "NOTSET")) or "NOTSET"
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.fail(f"auto_pad '{auto}' is not an ONNX padding mode")
    shape = ctx.attr("output_shape")
    if shape is None and auto in ("NOTSET", "VALID"):
        pads = [0] * (2 * n) if auto == "VALID" else _spatial(ctx, "pads", 2 * n, 0)
        if min(pads) < 0:
            raise ctx.fail(f"pads must not be negative, got {pads}")
        return pads
    if any(not D.is_static(d) for d in spatial_in):
        raise ctx.fail("output_shape and auto_pad need static spatial input sizes")
    sizes = [int(d) for d in spatial_in]  # type: ignore[arg-type]
    if shape is not None:
        target = [int(v) for v in shape][-n:]
        if len(target) != n:
            raise ctx.fail(f"output_shape {list(shape)} has fewer than {n} spatial sizes")
    else:
        target = [size * s for size, s in zip(sizes, strides)]
    begins, ends = [], []
    for a in range(n):
        full = (sizes[a] - 1) * strides[a] + out_pad[a] + (kernel[a] - 1) * dilations[a] + 1
        total = full - target[a]
        small = total // 2
        begin, end = (small, total - small) if auto == "SAME_UPPER" else (total - small, small)
        if end < 0:
            out_pad[a] -= end
            end = 0
        if begin < 0:
            raise ctx.fail(
                f"output_shape {target} is larger than the full output on spatial axis {a} "
                "at its start (a negative leading pad)"
            )
        begins.append(begin)
        ends.append(end)
    return begins + ends


def convert_conv_transpose(ctx: NodeContext) -> list:
    x, w, b = ctx.input(0, "X"), ctx.input(1, "W"), ctx.optional(2)
    rank = rank_of(x)
    if rank not in (3, 4) or rank_of(w) != rank:
        raise ctx.fail(
            f"only 1-D and 2-D ConvTranspose are supported (inputs of rank 3 or 4); the input "
            f"has rank {rank} and the weight rank {rank_of(w)}"
        )
    n = rank - 2
    kernel = [int(d) for d in shape_of(w)[2:]]  # type: ignore[arg-type]
    ks = ctx.attr("kernel_shape")
    if ks is not None and [int(k) for k in ks] != kernel:
        raise ctx.fail(f"kernel_shape {list(ks)} differs from the weight's {kernel}")
    strides = _spatial(ctx, "strides", n, 1)
    dilations = _spatial(ctx, "dilations", n, 1)
    out_pad = _spatial(ctx, "output_padding", n, 0)
    pads = _transpose_pads(ctx, shape_of(x)[2:], kernel, strides, dilations, out_pad)
    if n == 1:  # as a 2-D one of height 1
        strides, dilations, out_pad = [1] + strides, [1] + dilations, [0] + out_pad
        pads = [0, pads[0], 0, pads[1]]
        x = ctx.emit("expand_dims", [x], {"axis": 2})
        w = _unsqueeze_weight(ctx, w)
    attrs = {
        "strides": tuple(strides),
        "padding": (pads[0], pads[1], pads[2], pads[3]),
        "dilation": tuple(dilations),
        "output_padding": tuple(out_pad),
        "groups": int(ctx.attr("group", 1)),
    }
    y = ctx.emit("conv2d_transpose", [x, w] + ([b] if b is not None else []), attrs)
    if n == 1:
        y = ctx.emit("squeeze", [y], {"axes": (2,)})
    return [y]


def _unsqueeze_weight(ctx: NodeContext, w: Value) -> Value:
    if isinstance(w, Folded):
        return Folded(w.array.reshape(w.array.shape[:2] + (1,) + w.array.shape[2:]), w.name)
    return ctx.emit("expand_dims", [w], {"axis": 2})


def table() -> dict[str, Converter]:
    return {
        "HardSigmoid": convert_hard_sigmoid,
        "HardSwish": convert_hard_swish,
        "Resize": convert_resize,
        "Upsample": convert_upsample,
        "ConvTranspose": convert_conv_transpose,
    }
