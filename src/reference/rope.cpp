// tessera_rope's specification: each pair turned by its angle, all in double, rounded once.
#include <cmath>

#include "tessera/reference.hpp"

namespace tessera::reference {

void rope_row(const tessera_rope_desc& r, int64_t head_dim, double pos, float* x) {
  if (r.style == TESSERA_ROPE_NONE) return;
  const int64_t rot = r.rot_dim ? r.rot_dim : head_dim, half = rot / 2;
  const double theta = r.theta != 0.0f ? double(r.theta) : 10000.0;
  const double scale = r.position_scale != 0.0f ? double(r.position_scale) : 1.0;
  for (int64_t m = 0; m < half; ++m) {
    const double t = pos * scale * std::pow(theta, -2.0 * double(m) / double(rot));
    const bool neox = r.style == TESSERA_ROPE_NEOX;
    float& a = x[neox ? m : 2 * m];
    float& b = x[neox ? m + half : 2 * m + 1];
    const double va = a, vb = b;
    a = float(va * std::cos(t) - vb * std::sin(t));
    b = float(va * std::sin(t) + vb * std::cos(t));
  }
}

}  // namespace tessera::reference
