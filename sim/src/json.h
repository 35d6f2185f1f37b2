/* Minimal JSON reader for credit1sim scenarios (no external deps). */
#ifndef JSON_H
#define JSON_H
#include <stddef.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype_t;

typedef struct jval {
    jtype_t t;
    double num;
    int b;
    char *str;
    int n;               /* array/object length */
    struct jval **items; /* array items or object values */
    char **keys;         /* object keys */
} jval_t;

/* Parse text; on error returns NULL and writes a message into err. */
jval_t *json_parse(const char *text, char *err, size_t errlen);
const jval_t *json_get(const jval_t *obj, const char *key);
#endif
