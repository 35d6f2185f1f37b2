/* Minimal recursive-descent JSON reader (RFC 8259 subset: no \u surrogate pairs beyond BMP). */
#include "json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

typedef struct { const char *s; size_t pos; char *err; size_t errlen; int line; } jp_t;

static void *xmalloc(size_t n) { void *p = calloc(1, n ? n : 1); if (!p) { fprintf(stderr, "out of memory\n"); exit(3); } return p; }

static void ws(jp_t *p) {
    for (;;) {
        char c = p->s[p->pos];
        if (c == '\n') { p->line++; p->pos++; }
        else if (c == ' ' || c == '\t' || c == '\r') p->pos++;
        else break;
    }
}

static jval_t *fail(jp_t *p, const char *msg) {
    if (!p->err[0]) snprintf(p->err, p->errlen, "JSON syntax error at line %d (offset %zu): %s", p->line, p->pos, msg);
    return NULL;
}

static jval_t *parse_value(jp_t *p, int depth);

static char *parse_string_raw(jp_t *p) {
    if (p->s[p->pos] != '"') { fail(p, "expected string"); return NULL; }
    p->pos++;
    size_t cap = 16, len = 0; char *out = xmalloc(cap);
    for (;;) {
        char c = p->s[p->pos];
        if (c == 0) { free(out); fail(p, "unterminated string"); return NULL; }
        p->pos++;
        if (c == '"') break;
        if (c == '\\') {
            char e = p->s[p->pos++];
            switch (e) {
            case '"': c = '"'; break; case '\\': c = '\\'; break; case '/': c = '/'; break;
            case 'b': c = '\b'; break; case 'f': c = '\f'; break; case 'n': c = '\n'; break;
            case 'r': c = '\r'; break; case 't': c = '\t'; break;
            case 'u': { unsigned v = 0; for (int i = 0; i < 4; i++) { char h = p->s[p->pos++]; v <<= 4;
                        if (h >= '0' && h <= '9') v |= h - '0'; else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
                        else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10; else { free(out); fail(p, "bad \\u escape"); return NULL; } }
                        c = v < 128 ? (char)v : '?'; break; }
            default: free(out); fail(p, "bad escape"); return NULL;
            }
        }
        if (len + 2 > cap) { cap *= 2; out = realloc(out, cap); if (!out) exit(3); }
        out[len++] = c;
    }
    out[len] = 0;
    return out;
}

static jval_t *parse_value(jp_t *p, int depth) {
    if (depth > 64) return fail(p, "nesting too deep");
    ws(p);
    char c = p->s[p->pos];
    jval_t *v;
    if (c == '{') {
        p->pos++; v = xmalloc(sizeof *v); v->t = J_OBJ;
        int cap = 0;
        ws(p);
        if (p->s[p->pos] == '}') { p->pos++; return v; }
        for (;;) {
            ws(p);
            char *k = parse_string_raw(p); if (!k) return NULL;
            ws(p);
            if (p->s[p->pos] != ':') return fail(p, "expected ':'");
            p->pos++;
            jval_t *x = parse_value(p, depth + 1); if (!x) return NULL;
            if (v->n == cap) { cap = cap ? cap * 2 : 8; v->items = realloc(v->items, cap * sizeof *v->items); v->keys = realloc(v->keys, cap * sizeof *v->keys); }
            v->keys[v->n] = k; v->items[v->n] = x; v->n++;
            ws(p);
            if (p->s[p->pos] == ',') { p->pos++; continue; }
            if (p->s[p->pos] == '}') { p->pos++; return v; }
            return fail(p, "expected ',' or '}'");
        }
    } else if (c == '[') {
        p->pos++; v = xmalloc(sizeof *v); v->t = J_ARR;
        int cap = 0;
        ws(p);
        if (p->s[p->pos] == ']') { p->pos++; return v; }
        for (;;) {
            jval_t *x = parse_value(p, depth + 1); if (!x) return NULL;
            if (v->n == cap) { cap = cap ? cap * 2 : 8; v->items = realloc(v->items, cap * sizeof *v->items); }
            v->items[v->n++] = x;
            ws(p);
            if (p->s[p->pos] == ',') { p->pos++; continue; }
            if (p->s[p->pos] == ']') { p->pos++; return v; }
            return fail(p, "expected ',' or ']'");
        }
    } else if (c == '"') {
        char *s = parse_string_raw(p); if (!s) return NULL;
        v = xmalloc(sizeof *v); v->t = J_STR; v->str = s; return v;
    } else if (c == 't' && !strncmp(p->s + p->pos, "true", 4)) {
        p->pos += 4; v = xmalloc(sizeof *v); v->t = J_BOOL; v->b = 1; return v;
    } else if (c == 'f' && !strncmp(p->s + p->pos, "false", 5)) {
        p->pos += 5; v = xmalloc(sizeof *v); v->t = J_BOOL; v->b = 0; return v;
    } else if (c == 'n' && !strncmp(p->s + p->pos, "null", 4)) {
        p->pos += 4; v = xmalloc(sizeof *v); v->t = J_NULL; return v;
    } else if (c == '-' || isdigit((unsigned char)c)) {
        char *end; double d = strtod(p->s + p->pos, &end);
        if (end == p->s + p->pos) return fail(p, "bad number");
        p->pos = end - p->s;
        v = xmalloc(sizeof *v); v->t = J_NUM; v->num = d; return v;
    }
    return fail(p, "unexpected character");
}

jval_t *json_parse(const char *text, char *err, size_t errlen) {
    jp_t p = { text, 0, err, errlen, 1 };
    err[0] = 0;
    jval_t *v = parse_value(&p, 0);
    if (!v) return NULL;
    ws(&p);
    if (p.s[p.pos] != 0) return fail(&p, "trailing characters after JSON value");
    return v;
}

const jval_t *json_get(const jval_t *obj, const char *key) {
    if (!obj || obj->t != J_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++) if (!strcmp(obj->keys[i], key)) return obj->items[i];
    return NULL;
}
