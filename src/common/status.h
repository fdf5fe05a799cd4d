/* Status codes shared by every gpulse module: one X-macro table yields the
 * enum, the short name and the sentence, so a code and its text never drift. */
#ifndef GPULSE_STATUS_H
#define GPULSE_STATUS_H

#define GPULSE_STATUS_TABLE(X)                         \
	X(OK, "success")                               \
	X(ENOMEM, "out of memory")                     \
	X(EINVAL, "invalid argument")                  \
	X(ERANGE, "value out of range")                \
	X(EPARSE, "parse error")                       \
	X(EIO, "input/output error")                   \
	X(ENOENT, "not found")                         \
	X(ELIMIT, "a configured limit was reached")    \
	X(ETIMEDOUT, "timed out")                      \
	X(ENOTSUP, "not supported")                    \
	X(ENOLIB, "vendor library not available")      \
	X(ENODRIVER, "driver not loaded")              \
	X(EGPULOST, "GPU is lost")                     \
	X(EVENDOR, "vendor library error")             \
	X(EBUSY, "resource busy")                      \
	X(ESTATE, "operation not valid in this state") \
	X(ECANCELED, "canceled")

/* 0 is success; every other code is a positive small integer. (Left as
 * written by clang-format, which takes the table's expansion for the
 * start of a statement and indents the next line.) */
/* clang-format off */
enum gpulse_status {
#define GPULSE_STATUS_ENUM(name, text) GPULSE_##name,
	GPULSE_STATUS_TABLE(GPULSE_STATUS_ENUM)
#undef GPULSE_STATUS_ENUM
	GPULSE_STATUS_COUNT
};
/* clang-format on */

/* A sentence describing `status`; never NULL, static storage. */
const char *gpulse_strerror(int status);
/* The short name ("ENOMEM"); never NULL, static storage. */
const char *gpulse_err_name(int status);

#endif
