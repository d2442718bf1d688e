// The post-norm forward, x + Dropout(s) built in float32 rows, y of any type.
#define ADDNORM_FORWARD_ROWS post_norm_forward_rows
#define ADDNORM_FORWARD_ENTRY norm_forward_post_norm
#include "ops/cpu/norm_forward_unit.inc"
