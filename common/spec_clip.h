/* common/spec_clip.h — the clip functions of DP-SGD (docs/dpsgd.md step 4), declared once
 * for the reference, the engine and its backends (optimized/backend.h's clip_factors and
 * fused_clip_accum take it): c = min(1, C / ||g||) (abadi; c = 1 when ||g|| = 0) or
 * c = C / (||g|| + gamma) (automatic, Bu et al.). Names are the CLI's and the export's. */
#ifndef DP_SPEC_CLIP_H
#define DP_SPEC_CLIP_H

/* X(ID, "cli-name") — index = dp_clip_fn */
#define DP_CLIP_FNS(X) X(ABADI, "abadi") X(AUTOMATIC, "automatic")

typedef enum {
#define DP_CLIPFN_ID_(ID, name) DP_CLIPFN_##ID,
    DP_CLIP_FNS(DP_CLIPFN_ID_)
#undef DP_CLIPFN_ID_
    DP_CLIPFN_COUNT
} dp_clip_fn;

#endif
