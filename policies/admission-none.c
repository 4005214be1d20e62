/* none — admit every request the instance could ever serve (requests that
 * can never run are still rejected by the engine and the batch policy). */
#include "policy.h"

const struct admission_ops admission_none_ops = {
	.version = POLICY_VERSION,
	.name = "none",
	.description = "admit every request that can ever be served",
};
