/* safetensors: golden bytes derived from the format's rules, round trips of every dtype, and
 * clear errors on truncated or corrupt files; atomic writes keep the old file on failure. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "io/safetensors.h"

static char tmpdir[64];
static char path_buf[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ember_st_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(tmpdir);
}

TestSuite(safetensors, .init = make_tmpdir, .fini = remove_tmpdir);

static const char *tmp_path(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", tmpdir, name);
    return path_buf;
}

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*n + 1);
    cr_assert_eq(fread(buf, 1, *n, f), *n);
    fclose(f);
    return buf;
}

static void write_all(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* A file from a raw header string and data bytes, with the length prefix computed. */
static void write_raw(const char *path, const char *header, const void *data, size_t data_len)
{
    size_t h = strlen(header);
    unsigned char *buf = malloc(8 + h + data_len);
    for (int k = 0; k < 8; k++)
        buf[k] = (unsigned char)((uint64_t)h >> (8 * k));
    memcpy(buf + 8, header, h);
    memcpy(buf + 8 + h, data, data_len);
    write_all(path, buf, 8 + h + data_len);
    free(buf);
}

Test(safetensors, golden_single_f32)
{
    float v[6] = {0, 1, 2, 3, 4, 5};
    em_tensor *t = em_from_data(EM_SHAPE(1, 2, 3), EM_F32, v);
    em_st_entry e = {"attn.0", t};
    const char *p = tmp_path("one.safetensors");
    cr_assert_eq(em_safetensors_save(p, &e, 1, NULL, 0), EM_OK, "%s", em_error());
    /* 64 header bytes: already a multiple of 8, so no padding */
    static const char header[] =
        "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
    static const unsigned char data[24] = {0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40,
                                           0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40, 0, 0, 0xa0, 0x40};
    size_t n;
    unsigned char *got = read_all(p, &n);
    cr_assert_eq(n, 8 + 64 + 24);
    static const unsigned char len_le[8] = {64, 0, 0, 0, 0, 0, 0, 0};
    cr_assert_arr_eq(got, len_le, 8);
    cr_assert_arr_eq(got + 8, header, 64);
    cr_assert_arr_eq(got + 72, data, 24);
    free(got);
    em_release(t);
}

Test(safetensors, golden_order_metadata_padding)
{
    int64_t c = -1;
    float a = 1.0f;
    uint8_t b[2] = {1, 2};
    em_tensor *tb = em_from_data(EM_SHAPE(2), EM_U8, b);
    em_tensor *ta = em_from_data(EM_SHAPE(1), EM_F32, &a);
    em_tensor *tc = em_from_data(EM_SHAPE(1), EM_I64, &c);
    em_st_entry e[3] = {{"b", tb}, {"a", ta}, {"c", tc}};
    em_st_meta m[1] = {{"format", "pt"}};
    const char *p = tmp_path("order.safetensors");
    cr_assert_eq(em_safetensors_save(p, e, 3, m, 1), EM_OK, "%s", em_error());
    /* dtype rank descending (I64 > F32 > U8), metadata first; 193 bytes padded to 200 */
    static const char header[] =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"c\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[12,14]}}       ";
    cr_assert_eq(strlen(header), 200);
    static const unsigned char data[14] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                           0, 0, 0x80, 0x3f, 1, 2};
    size_t n;
    unsigned char *got = read_all(p, &n);
    cr_assert_eq(n, 8 + 200 + 14);
    static const unsigned char len_le[8] = {200, 0, 0, 0, 0, 0, 0, 0};
    cr_assert_arr_eq(got, len_le, 8);
    cr_assert_arr_eq(got + 8, header, 200, "got header: %.200s", (char *)got + 8);
    cr_assert_arr_eq(got + 208, data, 14);
    free(got);
    em_release(ta);
    em_release(tb);
    em_release(tc);
}

Test(safetensors, golden_empty)
{
    const char *p = tmp_path("empty.safetensors");
    cr_assert_eq(em_safetensors_save(p, NULL, 0, NULL, 0), EM_OK, "%s", em_error());
    static const unsigned char want[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ',
                                           ' ', ' '};
    size_t n;
    unsigned char *got = read_all(p, &n);
    cr_assert_eq(n, 16);
    cr_assert_arr_eq(got, want, 16);
    free(got);
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(p, &st), EM_OK, "%s", em_error());
    cr_assert_eq(st->n_tensors, 0);
    cr_assert_eq(st->n_meta, 0);
    em_safetensors_free(st);
}

Test(safetensors, escapes_names_like_json)
{
    float v = 2.0f;
    em_tensor *t = em_from_data(EM_SHAPE(1), EM_F32, &v);
    em_st_entry e = {"q\"\\\n\x01", t};
    const char *p = tmp_path("esc.safetensors");
    cr_assert_eq(em_safetensors_save(p, &e, 1, NULL, 0), EM_OK, "%s", em_error());
    size_t n;
    unsigned char *got = read_all(p, &n);
    static const char want[] = "{\"q\\\"\\\\\\n\\u0001\":{";
    cr_assert_arr_eq(got + 8, want, strlen(want));
    free(got);
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(p, &st), EM_OK, "%s", em_error());
    cr_assert_str_eq(st->names[0], "q\"\\\n\x01");
    em_safetensors_free(st);
    em_release(t);
}

Test(safetensors, round_trip_every_dtype)
{
    double f64[3] = {1.5, -2.25, 1e300};
    float f32[4] = {0.5f, -1.0f, 3.25f, 1e-30f};
    uint16_t f16[2] = {0x3c00, 0xc000}, bf16[3] = {0x3f80, 0x4000, 0xbf80};
    int64_t i64[2] = {INT64_MIN, 42};
    int32_t i32[3] = {-7, 0, INT32_MAX};
    int8_t i8[2] = {-128, 127};
    uint8_t u8[3] = {0, 128, 255};
    uint8_t bl[4] = {1, 0, 0, 1};
    float scalar = 7.0f;
    struct {
        const char *name;
        em_dtype dt;
        em_shape shape;
        const void *data;
        size_t nbytes;
    } cases[] = {
        {"f64", EM_F64, EM_SHAPE(3), f64, sizeof f64},
        {"f32", EM_F32, EM_SHAPE(2, 2), f32, sizeof f32},
        {"f16", EM_F16, EM_SHAPE(2, 1), f16, sizeof f16},
        {"bf16", EM_BF16, EM_SHAPE(3), bf16, sizeof bf16},
        {"i64", EM_I64, EM_SHAPE(2), i64, sizeof i64},
        {"i32", EM_I32, EM_SHAPE(1, 3), i32, sizeof i32},
        {"i8", EM_I8, EM_SHAPE(2), i8, sizeof i8},
        {"u8", EM_U8, EM_SHAPE(3), u8, sizeof u8},
        {"bool", EM_BOOL, EM_SHAPE(2, 2), bl, sizeof bl},
        {"scalar", EM_F32, EM_SCALAR_SHAPE, &scalar, sizeof scalar},
        {"empty", EM_F32, EM_SHAPE(0, 5), NULL, 0},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    em_st_entry e[N];
    for (int i = 0; i < N; i++) {
        e[i].name = cases[i].name;
        e[i].tensor = cases[i].data ? em_from_data(cases[i].shape, cases[i].dt, cases[i].data)
                                    : em_empty(cases[i].shape, cases[i].dt);
        cr_assert_not_null(e[i].tensor, "%s", em_error());
    }
    em_st_meta m[2] = {{"zeta", "last"}, {"alpha", "ünïcode \"quoted\""}};
    const char *p = tmp_path("all.safetensors");
    cr_assert_eq(em_safetensors_save(p, e, N, m, 2), EM_OK, "%s", em_error());
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(p, &st), EM_OK, "%s", em_error());
    cr_assert_eq(st->n_tensors, N);
    for (int i = 0; i < N; i++) {
        em_tensor *t = em_safetensors_get(st, cases[i].name);
        cr_assert_not_null(t, "missing %s", cases[i].name);
        cr_assert_eq(t->dtype, cases[i].dt, "%s", cases[i].name);
        cr_assert_eq(t->ndim, cases[i].shape.ndim, "%s", cases[i].name);
        for (int d = 0; d < t->ndim; d++)
            cr_assert_eq(t->shape[d], cases[i].shape.d[d]);
        if (cases[i].nbytes)
            cr_assert_arr_eq(em_data_ptr(t), cases[i].data, cases[i].nbytes, "%s",
                             cases[i].name);
        em_release(e[i].tensor);
    }
    cr_assert_eq(st->n_meta, 2);
    cr_assert_str_eq(st->meta_keys[0], "alpha");
    cr_assert_str_eq(em_safetensors_meta(st, "alpha"), "ünïcode \"quoted\"");
    cr_assert_str_eq(em_safetensors_meta(st, "zeta"), "last");
    cr_assert_null(em_safetensors_meta(st, "nope"));
    em_safetensors_free(st);
}

/* Load must fail with status want, a message naming the file and containing what, and leave
 * the caller's pointer alone. */
static void expect_load_error(const char *p, em_status want, const char *what)
{
    em_error_clear();
    em_safetensors *sentinel = (em_safetensors *)(uintptr_t)0x1234, *st = sentinel;
    cr_assert_eq(em_safetensors_load(p, &st), want, "status for %s: %s", what, em_error());
    cr_assert_eq(st, sentinel);
    cr_assert_not_null(strstr(em_error(), p), "message lacks the path: %s", em_error());
    cr_assert_not_null(strstr(em_error(), what), "message lacks '%s': %s", what, em_error());
    em_error_clear();
}

static void save_small(const char *p)
{
    float v[4] = {1, 2, 3, 4};
    em_tensor *t = em_from_data(EM_SHAPE(4), EM_F32, v);
    em_st_entry e = {"w", t};
    cr_assert_eq(em_safetensors_save(p, &e, 1, NULL, 0), EM_OK, "%s", em_error());
    em_release(t);
}

Test(safetensors, truncated_files)
{
    const char *p = tmp_path("trunc.safetensors");
    save_small(p);
    size_t n;
    unsigned char *full = read_all(p, &n);
    write_all(p, full, n - 3);
    expect_load_error(p, EM_ERR_IO, "truncated");
    write_all(p, full, 20);
    expect_load_error(p, EM_ERR_IO, "header length");
    write_all(p, full, 5);
    expect_load_error(p, EM_ERR_IO, "too short");
    free(full);
    expect_load_error(tmp_path("missing.safetensors"), EM_ERR_IO, "cannot open");
}

Test(safetensors, corrupt_json)
{
    const char *p = tmp_path("json.safetensors");
    float v = 1.0f;
    const char *bad[] = {
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}",  /* no closing brace */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}", /* trailing comma */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}x", /* trailing junk */
        "{\"a\":{\"dtype\":F32,\"shape\":[1],\"data_offsets\":[0,4]}}",      /* bare word */
        "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\x01\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_raw(p, bad[i], &v, 4);
        expect_load_error(p, EM_ERR_IO, "corrupt JSON");
    }
    write_raw(p, "[1,2,3]", &v, 4);
    expect_load_error(p, EM_ERR_IO, "the header is not a JSON object");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", &v, 4);
    expect_load_error(p, EM_ERR_IO, "needs a dtype");
    write_raw(p, "{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}", &v, 4);
    expect_load_error(p, EM_ERR_IO, "unknown dtype");
    write_raw(p, "{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}", &v, 4);
    expect_load_error(p, EM_ERR_UNSUPPORTED, "U16");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", &v, 4);
    expect_load_error(p, EM_ERR_IO, "shape");
    static const char not_utf8[] = "{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],"
                                   "\"data_offsets\":[0,4]}}";
    write_raw(p, not_utf8, &v, 4);
    expect_load_error(p, EM_ERR_IO, "UTF-8");
}

Test(safetensors, offsets_out_of_range)
{
    const char *p = tmp_path("offs.safetensors");
    float v[2] = {1, 2};
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", v, 4);
    expect_load_error(p, EM_ERR_IO, "disagree");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", v, 4);
    expect_load_error(p, EM_ERR_IO, "truncated");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", v, 8);
    expect_load_error(p, EM_ERR_IO, "overlaps");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", v, 8);
    expect_load_error(p, EM_ERR_IO, "gap");
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[18446744073709551612,0]}}", v, 4);
    expect_load_error(p, EM_ERR_IO, "too big integer"); /* offsets past int64: no real file */
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", v, 8);
    expect_load_error(p, EM_ERR_IO, "data section holds 8");
}

Test(safetensors, load_into_checks_before_writing)
{
    const char *p = tmp_path("into.safetensors");
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    em_tensor *ta = em_from_data(EM_SHAPE(2), EM_F32, a);
    em_tensor *tb = em_from_data(EM_SHAPE(3), EM_F32, b);
    em_st_entry e[2] = {{"a", ta}, {"b", tb}};
    cr_assert_eq(em_safetensors_save(p, e, 2, NULL, 0), EM_OK, "%s", em_error());

    em_tensor *da = em_zeros(EM_SHAPE(2), EM_F64);
    em_tensor *db = em_zeros(EM_SHAPE(4), EM_F32); /* wrong shape */
    em_st_entry d[2] = {{"a", da}, {"b", db}};
    cr_assert_eq(em_safetensors_load_into(p, d, 2), EM_ERR_ARG);
    cr_assert_not_null(strstr(em_error(), "'b'"), "%s", em_error());
    em_error_clear();
    cr_assert_eq(((double *)em_data_ptr(da))[0], 0.0); /* untouched */

    em_release(db);
    db = em_zeros(EM_SHAPE(3), EM_F32);
    d[1].tensor = db;
    cr_assert_eq(em_safetensors_load_into(p, d, 2), EM_OK, "%s", em_error());
    cr_assert_eq(((double *)em_data_ptr(da))[1], 2.0);
    cr_assert_eq(((float *)em_data_ptr(db))[2], 5.0f);
    em_st_entry missing = {"zz", da};
    cr_assert_eq(em_safetensors_load_into(p, &missing, 1), EM_ERR_IO);
    em_error_clear();
    em_release(ta);
    em_release(tb);
    em_release(da);
    em_release(db);
}

Test(safetensors, bad_arguments)
{
    float v = 1;
    em_tensor *t = em_from_data(EM_SHAPE(1), EM_F32, &v);
    em_st_entry dup[2] = {{"x", t}, {"x", t}};
    cr_assert_eq(em_safetensors_save(tmp_path("dup"), dup, 2, NULL, 0), EM_ERR_ARG);
    cr_assert_not_null(strstr(em_error(), "twice"));
    em_error_clear();
    em_st_entry meta_name = {"__metadata__", t};
    cr_assert_eq(em_safetensors_save(tmp_path("meta"), &meta_name, 1, NULL, 0), EM_ERR_ARG);
    em_error_clear();
    cr_assert_eq(access(tmp_path("dup"), F_OK), -1);
    em_release(t);
}

static int count_temp_files(void)
{
    int n = 0;
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

Test(safetensors, atomic_write_keeps_old_file)
{
    const char *p = tmp_path("model.safetensors");
    save_small(p);
    size_t n_old;
    unsigned char *old = read_all(p, &n_old);

    /* a file-size limit makes the write of a larger file fail part way */
    em_tensor *big = em_zeros(EM_SHAPE(64, 1024), EM_F32);
    em_st_entry e = {"big", big};
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit saved, lim;
    getrlimit(RLIMIT_FSIZE, &saved);
    lim = saved;
    lim.rlim_cur = 4096;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    em_status st = em_safetensors_save(p, &e, 1, NULL, 0);
    setrlimit(RLIMIT_FSIZE, &saved);
    cr_assert_eq(st, EM_ERR_IO, "%s", em_error());
    cr_assert_not_null(strstr(em_error(), p), "%s", em_error());
    em_error_clear();

    size_t n_now;
    unsigned char *now = read_all(p, &n_now);
    cr_assert_eq(n_now, n_old);
    cr_assert_arr_eq(now, old, n_old);
    cr_assert_eq(count_temp_files(), 0);

    char missing[300];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.safetensors", tmpdir);
    cr_assert_eq(em_safetensors_save(missing, &e, 1, NULL, 0), EM_ERR_IO);
    cr_assert_not_null(strstr(em_error(), missing), "%s", em_error());
    em_error_clear();

    cr_assert_eq(em_safetensors_save(p, &e, 1, NULL, 0), EM_OK, "%s", em_error());
    em_safetensors *loaded = NULL;
    cr_assert_eq(em_safetensors_load(p, &loaded), EM_OK, "%s", em_error());
    cr_assert_eq(em_numel(em_safetensors_get(loaded, "big")), 64 * 1024);
    em_safetensors_free(loaded);
    free(old);
    free(now);
    em_release(big);
}

/* A shape whose element count overflows is named as such, not as a byte-count disagreement. */
Test(safetensors, shape_overflow_is_named)
{
    const char *p = tmp_path("overflow.safetensors");
    float v = 1.0f;
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,2],"
                 "\"data_offsets\":[0,4]}}", &v, 4);
    expect_load_error(p, EM_ERR_IO, "tensor 'a': shape [4294967296,4294967296,2] of F32 "
                                    "overflows a size");
}

/* em_safetensors_load_meta reads the header alone: the metadata of a file whose data is there
 * (no tensors taken), and the same checks of the header: a file shorter than its offsets say is
 * refused without any data being read. */
Test(safetensors, load_meta_reads_the_header_alone)
{
    const char *p = tmp_path("meta.safetensors");
    const char *header = "{\"__metadata__\":{\"recipe\":\"mlp\",\"b\":\"2\"},"
                         "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    const float w[2] = {1.5f, -2.0f};
    write_raw(p, header, w, sizeof w);
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load_meta(p, &st), EM_OK, "%s", em_error());
    cr_expect_eq(st->n_tensors, 0);
    cr_expect_eq(st->n_meta, 2);
    cr_expect_str_eq(em_safetensors_meta(st, "recipe"), "mlp");
    cr_expect_str_eq(em_safetensors_meta(st, "b"), "2");
    cr_expect_null(em_safetensors_get(st, "w"));
    em_safetensors_free(st);
    write_raw(p, header, w, 4);
    st = NULL;
    cr_expect_eq(em_safetensors_load_meta(p, &st), EM_ERR_IO);
    cr_expect_null(st);
    cr_expect(strstr(em_error(), p), "%s", em_error());
    em_error_clear();
}

/* The largest resident size so far, in KiB. */
static long max_rss_kib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

/* A header is read token by token: 15 MB of empty objects in one array (a tree of them took 77
 * times its size, 1.15 GB) is refused at the array, taking no more than the header's own bytes;
 * nesting past a tensor's shape and every duplicate name are refused as they are read. */
Test(safetensors, a_header_costs_what_it_declares_not_a_tree_of_its_text)
{
    const char *p = tmp_path("bomb.safetensors");
    enum { EMPTIES = 5000000 };
    char *hdr = malloc(3 * EMPTIES + 16);
    char *at = hdr + sprintf(hdr, "{\"a\":[");
    for (int i = 0; i < EMPTIES; i++)
        at += sprintf(at, i ? ",{}" : "{}");
    strcpy(at, "]}");
    write_raw(p, hdr, "", 0);
    free(hdr);
    long before = max_rss_kib();
    expect_load_error(p, EM_ERR_IO, "entry 'a' is not an object");
    long grown = max_rss_kib() - before;
    cr_assert_lt(grown, 48 * 1024, "loading a 15 MB header grew the process by %ld KiB", grown);
    float v = 1;
    const char *bad[][2] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}",
         "corrupt JSON at byte 29: nested deeper than 3"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
         "corrupt JSON at byte 54: duplicate object key"},
        {"{\"__metadata__\":{},\"__metadata__\":null}", "duplicate object key"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", "duplicate object key 'k' in __metadata__"},
        {"{\"__metadata__\":{\"k\":1}}", "metadata 'k' is not a string"},
        {"{\"__metadata__\":[]}", "__metadata__ is not an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,2,3,4,5,6,7,8,9],\"data_offsets\":[0,4]}}",
         "tensor 'a' has more than 8 dims"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}",
         "needs a dtype string, a shape array and two data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}",
         "tensor 'a' has unknown field 'extra'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_raw(p, bad[i][0], &v, 4);
        expect_load_error(p, i == 6 ? EM_ERR_UNSUPPORTED : EM_ERR_IO, bad[i][1]);
    }
    /* null metadata is none */
    write_raw(p, "{\"__metadata__\":null,\"a\":{\"dtype\":\"F32\",\"shape\":[],"
                 "\"data_offsets\":[0,4]}}", &v, 4);
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(p, &st), EM_OK, "%s", em_error());
    cr_assert(st->n_meta == 0 && st->n_tensors == 1 && em_safetensors_get(st, "a"));
    em_safetensors_free(st);
}

/* Names are hashed: 80,000 tensors saved (their names checked for duplicates), loaded and each
 * found by name take a second or two, where the pairwise checks and linear searches took 87 s
 * (19.7 s to save, 65.5 s to look up). The bound is loose: it fails only a quadratic cost. */
Test(safetensors, many_names_save_load_and_look_up_in_linear_time, .timeout = 120)
{
    enum { N = 80000 };
    const char *p = tmp_path("many.safetensors");
    em_st_entry *e = calloc(N, sizeof *e);
    char (*names)[40] = malloc(sizeof(*names) * N);
    em_tensor *t = em_full(EM_SHAPE(1), EM_F32, 2);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "layers.%d.linear.weight", i);
        e[i] = (em_st_entry){names[i], t};
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(em_safetensors_save(p, e, N, NULL, 0), EM_OK, "%s", em_error());
    em_safetensors *st = NULL;
    cr_assert_eq(em_safetensors_load(p, &st), EM_OK, "%s", em_error());
    for (int i = 0; i < N; i++) {
        em_tensor *got = em_safetensors_get(st, names[i]);
        cr_assert(got && ((const float *)em_data_ptr(got))[0] == 2, "%s", names[i]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    cr_assert_lt(s, 20.0, "%d tensors took %.1f s to save, load and look up", N, s);
    cr_assert_null(em_safetensors_get(st, "layers.80000.linear.weight"));
    em_safetensors_free(st);
    /* a duplicate among them is still found, and named */
    e[N - 1].name = names[12345];
    cr_assert_eq(em_safetensors_save(p, e, N, NULL, 0), EM_ERR_ARG);
    cr_assert_str_eq(em_error(), "em_safetensors_save: name 'layers.12345.linear.weight' appears "
                                 "twice");
    em_error_clear();
    em_release(t);
    free(names);
    free(e);
}
