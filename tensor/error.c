/* Sticky, thread-local errors: the first message and status since the last em_error_clear(). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tensor/error.h"

#define ERROR_MAX 512

static _Thread_local em_status first_status = EM_OK;
static _Thread_local char first_message[ERROR_MAX];

const char *em_error(void)
{
    return first_message;
}

em_status em_error_status(void)
{
    return first_status;
}

bool em_has_error(void)
{
    return first_status != EM_OK;
}

void em_error_clear(void)
{
    first_status = EM_OK;
    first_message[0] = '\0';
}

em_status em_error_prefix(const char *prefix)
{
    size_t head = strlen(prefix) + 2, len = strlen(first_message);
    if (first_status == EM_OK || head >= ERROR_MAX)
        return first_status;
    if (len > ERROR_MAX - 1 - head) /* the message's end gives way */
        len = ERROR_MAX - 1 - head;
    memmove(first_message + head, first_message, len);
    first_message[head + len] = '\0';
    memcpy(first_message, prefix, head - 2);
    memcpy(first_message + head - 2, ": ", 2);
    return first_status;
}

em_status em_set_error(em_status status, const char *fmt, ...)
{
    if (first_status != EM_OK || status == EM_OK)
        return status;
    first_status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(first_message, sizeof first_message, fmt, ap);
    va_end(ap);
    return status;
}

bool em_present(const void *p, const char *fn, const char *name)
{
    if (!p)
        em_set_error(EM_ERR_ARG, "%s: %s is NULL", fn, name);
    return p != NULL;
}

bool em_array_present(const void *p, int64_t count, const char *fn, const char *name,
                      const char *count_name)
{
    if (count < 0)
        em_set_error(EM_ERR_ARG, "%s: %s is %lld, negative", fn, count_name, (long long)count);
    else if (count > 0 && !p)
        em_set_error(EM_ERR_ARG, "%s: %s is NULL with %s %lld", fn, name, count_name,
                     (long long)count);
    return count == 0 || (count > 0 && p);
}
