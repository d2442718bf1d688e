// oneDNN (Debian's libdnnl 2.6): layer_normalization forward and backward in f32 and bf16,
// batch_normalization training forward and backward (f32), and the pre-norm Add&Norm (f32 and bf16)
// composed from a binary add and a layer_normalization (oneDNN has no fused one, and no RMSNorm
// before 3.x). Primitives, memory objects, argument maps and a user-mode scratchpad are all made
// here, outside the timed call.
#include <cmath>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "runner.hpp"

namespace addnorm::bench {
namespace {

using dnnl::memory;
using dnnl::normalization_flags;
using dnnl::prop_kind;
using Args = std::unordered_map<int, memory>;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One primitive with its arguments, shared by the runner's closure.
struct Step {
  dnnl::primitive primitive;
  Args args;
};

struct Pipeline {
  dnnl::stream stream{cpu_engine()};
  std::vector<Step> steps;
  void run() {
    for (Step& step : steps) step.primitive.execute(stream, step.args);
    stream.wait();
  }
};

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

const normalization_flags kScaleShift =
    normalization_flags::use_scale | normalization_flags::use_shift;

struct Memories {
  memory::desc data;
  memory::desc stat;
  memory::desc column;
  memory src, dst, diff_dst, diff_src, scale, shift, diff_scale, diff_shift, mean, variance;
};

// The workspace's [rows, dim] tensors in the case's storage type.
struct Tensors {
  void *x, *r, *h, *y, *dy, *dh_next, *dx;
};

Tensors tensors(const Case& c, Workspace& ws) {
  if (c.dtype == DType::bf16) {
    return {ws.x_bf16, ws.r_bf16, ws.h_bf16, ws.y_bf16, ws.dy_bf16, ws.dh_next_bf16, ws.dx_bf16};
  }
  return {ws.x, ws.r, ws.h, ws.y, ws.dy, ws.dh_next, ws.dx};
}

// Memories of a normalisation reading `src` and writing `dst` (dy and dx are the workspace's).
Memories make_memories(const Case& c, Workspace& ws, void* src, void* dst) {
  dnnl::engine& engine = cpu_engine();
  const auto type = c.dtype == DType::bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const Tensors t = tensors(c, ws);
  Memories m;
  m.data = memory::desc({c.rows, c.dim}, type, memory::format_tag::ab);
  m.stat = memory::desc({c.rows}, memory::data_type::f32, memory::format_tag::a);
  m.column = memory::desc({c.dim}, memory::data_type::f32, memory::format_tag::a);
  m.src = memory(m.data, engine, src);
  m.dst = memory(m.data, engine, dst);
  m.diff_dst = memory(m.data, engine, t.dy);
  m.diff_src = memory(m.data, engine, t.dx);
  m.scale = memory(m.column, engine, ws.gamma);
  m.shift = memory(m.column, engine, ws.beta);
  m.diff_scale = memory(m.column, engine, ws.dgamma);
  m.diff_shift = memory(m.column, engine, ws.dbeta);
  m.mean = memory(m.stat, engine, ws.mean);
  m.variance = memory(m.stat, engine, ws.variance);
  return m;
}

template <class PrimitiveDesc>
memory scratchpad_for(const PrimitiveDesc& pd) {
  return memory(pd.scratchpad_desc(), cpu_engine());
}

dnnl::layer_normalization_forward::primitive_desc layer_norm_forward_pd(const Memories& m) {
  const dnnl::layer_normalization_forward::desc desc(prop_kind::forward_training, m.data, m.stat,
                                                     kLayerNormEps, kScaleShift);
  return {desc, user_scratchpad(), cpu_engine()};
}

Step layer_norm_forward_step(const Memories& m) {
  const auto pd = layer_norm_forward_pd(m);
  return {dnnl::layer_normalization_forward(pd),
          {{DNNL_ARG_SRC, m.src},
           {DNNL_ARG_DST, m.dst},
           {DNNL_ARG_SCALE, m.scale},
           {DNNL_ARG_SHIFT, m.shift},
           {DNNL_ARG_MEAN, m.mean},
           {DNNL_ARG_VARIANCE, m.variance},
           {DNNL_ARG_SCRATCHPAD, scratchpad_for(pd)}}};
}

Step layer_norm_backward_step(const Memories& m) {
  const auto forward_pd = layer_norm_forward_pd(m);
  const dnnl::layer_normalization_backward::desc desc(prop_kind::backward, m.data, m.data, m.stat,
                                                      kLayerNormEps, kScaleShift);
  const dnnl::layer_normalization_backward::primitive_desc pd(desc, user_scratchpad(), cpu_engine(),
                                                              forward_pd);
  return {dnnl::layer_normalization_backward(pd),
          {{DNNL_ARG_SRC, m.src},
           {DNNL_ARG_DIFF_DST, m.diff_dst},
           {DNNL_ARG_MEAN, m.mean},
           {DNNL_ARG_VARIANCE, m.variance},
           {DNNL_ARG_SCALE, m.scale},
           {DNNL_ARG_SHIFT, m.shift},  // required by execute, though the gradient ignores it
           {DNNL_ARG_DIFF_SRC, m.diff_src},
           {DNNL_ARG_DIFF_SCALE, m.diff_scale},
           {DNNL_ARG_DIFF_SHIFT, m.diff_shift},
           {DNNL_ARG_SCRATCHPAD, scratchpad_for(pd)}}};
}

// dst = a + b, elementwise (dst may be a).
Step add_step(const memory::desc& data, void* a, void* b, void* dst) {
  dnnl::engine& engine = cpu_engine();
  const dnnl::binary::desc desc(dnnl::algorithm::binary_add, data, data, data);
  const dnnl::binary::primitive_desc pd(desc, user_scratchpad(), engine);
  return {dnnl::binary(pd),
          {{DNNL_ARG_SRC_0, memory(data, engine, a)},
           {DNNL_ARG_SRC_1, memory(data, engine, b)},
           {DNNL_ARG_DST, memory(data, engine, dst)},
           {DNNL_ARG_SCRATCHPAD, scratchpad_for(pd)}}};
}

dnnl::batch_normalization_forward::primitive_desc batch_norm_forward_pd(const Memories& m) {
  const dnnl::batch_normalization_forward::desc desc(prop_kind::forward_training, m.data,
                                                     kLayerNormEps, kScaleShift);
  return {desc, user_scratchpad(), cpu_engine()};
}

Step batch_norm_forward_step(const Memories& m, Workspace& ws) {
  dnnl::engine& engine = cpu_engine();
  const auto pd = batch_norm_forward_pd(m);
  return {dnnl::batch_normalization_forward(pd),
          {{DNNL_ARG_SRC, m.src},
           {DNNL_ARG_DST, m.dst},
           {DNNL_ARG_SCALE, m.scale},
           {DNNL_ARG_SHIFT, m.shift},
           {DNNL_ARG_MEAN, memory(m.column, engine, ws.column_stat_a)},
           {DNNL_ARG_VARIANCE, memory(m.column, engine, ws.column_stat_b)},
           {DNNL_ARG_SCRATCHPAD, scratchpad_for(pd)}}};
}

// The training backward from the batch's mean (column_stat_a, as prepare_saved_stats leaves it)
// and variance (`variance`, per column: oneDNN takes the variance, the workspace holds rstd).
Step batch_norm_backward_step(const Memories& m, Workspace& ws, float* variance) {
  dnnl::engine& engine = cpu_engine();
  const dnnl::batch_normalization_backward::desc desc(prop_kind::backward, m.data, m.data,
                                                      kLayerNormEps, kScaleShift);
  const dnnl::batch_normalization_backward::primitive_desc pd(desc, user_scratchpad(), engine,
                                                              batch_norm_forward_pd(m));
  return {dnnl::batch_normalization_backward(pd),
          {{DNNL_ARG_SRC, m.src},
           {DNNL_ARG_DIFF_DST, m.diff_dst},
           {DNNL_ARG_MEAN, memory(m.column, engine, ws.column_stat_a)},
           {DNNL_ARG_VARIANCE, memory(m.column, engine, variance)},
           {DNNL_ARG_SCALE, m.scale},
           {DNNL_ARG_SHIFT, m.shift},
           {DNNL_ARG_DIFF_SRC, m.diff_src},
           {DNNL_ARG_DIFF_SCALE, m.diff_scale},
           {DNNL_ARG_DIFF_SHIFT, m.diff_shift},
           {DNNL_ARG_SCRATCHPAD, scratchpad_for(pd)}}};
}

// oneDNN's backwards want the forward's variance; the workspace holds rstd = 1/sqrt(var + eps).
void variances_from_rstds(const float* rstd, int64_t count, float* variance) {
  for (int64_t i = 0; i < count; ++i) variance[i] = 1.0f / (rstd[i] * rstd[i]) - kLayerNormEps;
}
void variance_from_rstd(const Case& c, Workspace& ws) {
  variances_from_rstds(ws.rstd, c.rows, ws.variance);
}

void push(std::vector<Runner>& out, const std::string& note, std::shared_ptr<Pipeline> pipeline) {
  out.push_back({"onednn", note, [pipeline] { pipeline->run(); }});
}

}  // namespace

void add_onednn_runners(const Case& c, Workspace& ws, std::vector<Runner>& out) {
  const bool bf16 = c.dtype == DType::bf16;
  const std::string bf16_note = bf16 ? "bf16 data, f32 statistics" : "";
  const Tensors t = tensors(c, ws);
  auto pipeline = std::make_shared<Pipeline>();
  try {
    switch (c.op) {
      case Op::layer_norm_fwd: {
        pipeline->steps.push_back(layer_norm_forward_step(make_memories(c, ws, t.x, t.y)));
        push(out, bf16_note, pipeline);
        break;
      }
      case Op::layer_norm_bwd: {
        variance_from_rstd(c, ws);
        pipeline->steps.push_back(layer_norm_backward_step(make_memories(c, ws, t.x, t.y)));
        push(out, bf16_note, pipeline);
        break;
      }
      case Op::layer_norm_fwdbwd: {
        const Memories m = make_memories(c, ws, t.x, t.y);
        pipeline->steps.push_back(layer_norm_forward_step(m));
        pipeline->steps.push_back(layer_norm_backward_step(m));
        push(out, bf16_note, pipeline);
        break;
      }
      case Op::add_norm_pre_fwd: {
        const Memories m = make_memories(c, ws, t.h, t.y);
        pipeline->steps.push_back(add_step(m.data, t.x, t.r, t.h));
        pipeline->steps.push_back(layer_norm_forward_step(m));
        push(out, "binary add, then layer_normalization", pipeline);
        break;
      }
      case Op::add_norm_pre_bwd: {
        variance_from_rstd(c, ws);
        const Memories m = make_memories(c, ws, t.h, t.y);
        pipeline->steps.push_back(layer_norm_backward_step(m));
        pipeline->steps.push_back(add_step(m.data, t.dx, t.dh_next, t.dx));
        push(out, "layer_normalization backward, then binary add", pipeline);
        break;
      }
      case Op::batch_norm_train_fwd: {
        if (bf16) break;
        pipeline->steps.push_back(batch_norm_forward_step(make_memories(c, ws, t.x, t.y), ws));
        push(out, "no running-statistics update", pipeline);
        break;
      }
      case Op::batch_norm_train_bwd: {
        if (bf16) break;
        auto variance = std::make_shared<std::vector<float>>(c.dim);
        variances_from_rstds(ws.column_stat_b, c.dim, variance->data());
        pipeline->steps.push_back(
            batch_norm_backward_step(make_memories(c, ws, t.x, t.y), ws, variance->data()));
        out.push_back({"onednn", "", [pipeline, variance] { pipeline->run(); }});
        break;
      }
      default:
        break;  // no RMSNorm in oneDNN 2.6, no dropout in its normalisations
    }
  } catch (const dnnl::error& e) {
    // A storage type this build of oneDNN cannot do on this CPU: report it, skip the runner.
    out.push_back({"onednn", std::string("unavailable: ") + e.what(), nullptr});
  }
}

}  // namespace addnorm::bench
