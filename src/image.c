/* SPDX-License-Identifier: BSD-3-Clause */
/* image.c - JPEG (libjpeg API: libjpeg-turbo) and PNG (libpng) decoding to RGB, and PIL's
 * BILINEAR resize + centre crop. The rules are in image.h. */
#include "image.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "util.h"

#ifdef HAVE_JPEG
#include <jerror.h>
#include <jpeglib.h>
#endif
#ifdef HAVE_PNG
#include <png.h>
#endif

#ifdef HAVE_JPEG
int image_have_jpeg(void) { return 1; }
#else
int image_have_jpeg(void) { return 0; }
#endif
#ifdef HAVE_PNG
int image_have_png(void) { return 1; }
#else
int image_have_png(void) { return 0; }
#endif

const char *image_missing_libs(void) {
    if (!image_have_jpeg() && !image_have_png()) return "libjpeg (libjpeg-turbo) and libpng";
    if (!image_have_jpeg()) return "libjpeg (libjpeg-turbo)";
    if (!image_have_png()) return "libpng";
    return "";
}

static int fail(char *err, size_t errlen, const char *fmt, const char *arg) {
    snprintf(err, errlen, fmt, arg);
    return -1;
}

static int too_big(long long w, long long h, long long max_pixels, char *err, size_t errlen) {
    if (w <= 0 || h <= 0) {
        snprintf(err, errlen, "an image of %lldx%lld pixels (damaged file?)", w, h);
        return 1;
    }
    if (w * h > max_pixels) {
        snprintf(err, errlen, "an image of %lldx%lld pixels, more than the %lld supported", w, h, max_pixels);
        return 1;
    }
    return 0;
}

/* ---- JPEG --------------------------------------------------------------------------------- */
#ifdef HAVE_JPEG
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX + 64];
} JpegErr;

static void jpeg_fail(j_common_ptr c) {
    JpegErr *e = (JpegErr *)c->err;
    char m[JMSG_LENGTH_MAX];
    c->err->format_message(c, m);
    snprintf(e->msg, sizeof e->msg, "not a readable JPEG file (%s)", m);
    longjmp(e->jb, 1);
}

/* Warnings are ignored as PIL ignores them, except the end of the data before the image's end,
 * where libjpeg would pad with grey: PIL refuses a truncated file. */
static void jpeg_message(j_common_ptr c, int level) {
    JpegErr *e = (JpegErr *)c->err;
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) {
        snprintf(e->msg, sizeof e->msg, "a truncated JPEG file (the data ends before the image does)");
        longjmp(e->jb, 1);
    }
}

static int decode_jpeg(FILE *f, long long max_pixels, ImageRGB *out, char *err, size_t errlen) {
    struct jpeg_decompress_struct cinfo;
    JpegErr jerr;
    uint8_t *volatile buf = NULL;
    cinfo.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = jpeg_fail;
    jerr.pub.emit_message = jpeg_message;
    if (setjmp(jerr.jb)) {
        jpeg_destroy_decompress(&cinfo);
        free(buf);
        return fail(err, errlen, "%s", jerr.msg);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_stdio_src(&cinfo, f);   /* 4 kB at a time; the end of the file is JWRN_JPEG_EOF, as in memory */
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&cinfo);
        return fail(err, errlen, "a CMYK JPEG: not supported (convert it to RGB first)%s", "");
    }
    if (too_big(cinfo.image_width, cinfo.image_height, max_pixels, err, errlen)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_components != 3) {
        jpeg_destroy_decompress(&cinfo);
        return fail(err, errlen, "a JPEG of an unsupported colour space%s", "");
    }
    size_t w = cinfo.output_width, h = cinfo.output_height;
    buf = mallocCheck(w * h * 3);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = buf + (size_t)cinfo.output_scanline * w * 3;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    out->w = (int)w;
    out->h = (int)h;
    out->rgb = buf;
    return 0;
}
#endif

/* ---- PNG ---------------------------------------------------------------------------------- */
#ifdef HAVE_PNG
typedef struct {
    FILE *f;
    char msg[256];
} PngSrc;

static void png_fail(png_structp png, png_const_charp m) {
    PngSrc *s = png_get_error_ptr(png);
    if (!s->msg[0]) snprintf(s->msg, sizeof s->msg, "not a readable PNG file (%s)", m);
    png_longjmp(png, 1);
}

static void png_warn(png_structp png, png_const_charp m) { (void)png; (void)m; }

static void png_read_file(png_structp png, png_bytep dst, size_t len) {
    PngSrc *s = png_get_io_ptr(png);
    if (fread(dst, 1, len, s->f) != len) {
        if (ferror(s->f)) snprintf(s->msg, sizeof s->msg, "a read error in the PNG data");
        else snprintf(s->msg, sizeof s->msg, "a truncated PNG file (the data ends before the image does)");
        png_error(png, "truncated");
    }
}

static int decode_png(FILE *f, long long max_pixels, ImageRGB *out, char *err, size_t errlen) {
    PngSrc src = {f, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_warn);
    if (!png) return fail(err, errlen, "out of memory%s", "");
    png_infop info = png_create_info_struct(png);
    uint8_t *volatile buf = NULL;
    png_bytep *volatile rows = NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        free(buf);
        free(rows);
        return fail(err, errlen, "%s", src.msg[0] ? src.msg : "not a readable PNG file");
    }
    png_set_read_fn(png, &src, png_read_file);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    if (too_big(w, h, max_pixels, src.msg, sizeof src.msg)) png_error(png, "too big");
    /* Palette images: the indices are read (one byte each) and looked up here, so that an index
     * past the palette is refused; libpng would give it black, PIL a grey of its value. tRNS
     * (alpha) is dropped, as below. */
    const int palette = ctype == PNG_COLOR_TYPE_PALETTE;
    png_colorp plte = NULL;
    int nplte = 0;
    if (palette) {
        if (!png_get_PLTE(png, info, &plte, &nplte) || nplte < 1) {
            snprintf(src.msg, sizeof src.msg, "a palette PNG without a palette (damaged file?)");
            png_error(png, "no PLTE");
        }
        if (depth < 8) png_set_packing(png);
    }
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);                            /* the high byte */
    png_set_strip_alpha(png);
    if (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const int want = palette ? 1 : 3;
    if (png_get_channels(png, info) != want || png_get_rowbytes(png, info) != (size_t)w * (size_t)want) {
        snprintf(src.msg, sizeof src.msg, "a PNG of an unsupported layout (%d channels, %zu bytes a row)",
                 png_get_channels(png, info), (size_t)png_get_rowbytes(png, info));
        png_error(png, "layout");
    }
    buf = mallocCheck((size_t)w * h * 3);
    rows = mallocCheck(h * sizeof(png_bytep));
    for (png_uint_32 y = 0; y < h; y++) rows[y] = buf + (size_t)y * w * 3;
    png_read_image(png, rows);
    /* Palette: each row's w indices sit at its start; looked up in place from the right, where
     * the 3 bytes written for pixel x (at 3x) never cover an index not yet read (at x or left). */
    for (png_uint_32 y = 0; palette && y < h; y++) {
        uint8_t *row = rows[y];
        for (png_uint_32 x = w; x-- > 0;) {
            const int v = row[x];
            if (v >= nplte) {
                snprintf(src.msg, sizeof src.msg, "a PNG palette index (%d) past the palette's %d entries (damaged file?)", v, nplte);
                png_error(png, "index");
            }
            row[3 * (size_t)x] = plte[v].red;
            row[3 * (size_t)x + 1] = plte[v].green;
            row[3 * (size_t)x + 2] = plte[v].blue;
        }
    }
    /* The chunks after the image data (up to IEND) are not read: PIL does not need them. */
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    out->w = (int)w;
    out->h = (int)h;
    out->rgb = buf;
    return 0;
}
#endif

int image_decode_file(FILE *f, long long max_pixels, ImageRGB *out, char *err, size_t errlen) {
    out->w = out->h = 0;
    out->rgb = NULL;
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    /* The format from the first bytes: nothing more of a file that is no image is read. */
    uint8_t sig[8];
    size_t size = fread(sig, 1, sizeof sig, f);
    if (ferror(f)) return fail(err, errlen, "cannot read: a read error%s", "");
    if (size == 0) return fail(err, errlen, "an empty file (0 bytes)%s", "");
    int jpeg = size >= 3 && sig[0] == 0xff && sig[1] == 0xd8 && sig[2] == 0xff;
    int png = size >= 8 && memcmp(sig, png_sig, 8) == 0;
    if (!jpeg && !png) {
        char hex[3 * 8 + 1] = "";
        for (size_t i = 0, o = 0; i < size; i++) o += (size_t)snprintf(hex + o, sizeof hex - o, "%s%02x", i ? " " : "", sig[i]);
        return fail(err, errlen, "neither a JPEG nor a PNG file (it starts with the bytes %s)", hex);
    }
    if (fseek(f, 0, SEEK_SET) != 0) return fail(err, errlen, "cannot read: the file cannot be rewound%s", "");
    if (jpeg) {
#ifdef HAVE_JPEG
        return decode_jpeg(f, max_pixels, out, err, errlen);
#else
        return fail(err, errlen, "a JPEG file, but ddptrain-data was built without %s", "libjpeg");
#endif
    }
#ifdef HAVE_PNG
    return decode_png(f, max_pixels, out, err, errlen);
#else
    return fail(err, errlen, "a PNG file, but ddptrain-data was built without %s", "libpng");
#endif
}

int image_decode(const uint8_t *data, size_t size, long long max_pixels, ImageRGB *out,
                 char *err, size_t errlen) {
    out->w = out->h = 0;
    out->rgb = NULL;
    if (size == 0) return fail(err, errlen, "an empty file (0 bytes)%s", "");
    FILE *f = fmemopen((void *)data, size, "rb");   /* read only: the bytes are not written */
    CHECK(f != NULL);
    int rc = image_decode_file(f, max_pixels, out, err, errlen);
    fclose(f);
    return rc;
}

/* ---- resize + crop ------------------------------------------------------------------------ */

#define PRECISION_BITS (32 - 8 - 2)

/* PIL's precompute_coeffs for the bilinear (triangle) filter over the box [0, in_size) resized
 * to out_size, then normalize_coeffs_8bpc, for the count output indices from first on only:
 * each index's coefficients depend on nothing but the index, and the centre crop keeps S of
 * them (out_size may pass 2^31 for a very elongated image; in_size < 2^31). bounds: [count][2]
 * (first input index, count); kk: [count][ksize]. */
static int coeffs(int64_t in_size, int64_t out_size, int64_t first, int count, int **bounds_out, int32_t **kk_out) {
    double scale = (double)in_size / (double)out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = mallocCheck((size_t)count * 2 * sizeof(int));
    int32_t *kk = mallocCheck((size_t)count * (size_t)ksize * sizeof(int32_t));
    double *k = mallocCheck((size_t)ksize * sizeof(double));
    for (int i = 0; i < count; i++) {
        int64_t xx = first + i;
        double center = ((double)xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = (int)in_size;
        xmax -= xmin;
        int x;
        for (x = 0; x < xmax; x++) {
            double t = fabs((x + xmin - center + 0.5) * ss);
            double wgt = t < 1.0 ? 1.0 - t : 0.0;
            k[x] = wgt;
            ww += wgt;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        for (x = 0; x < ksize; x++)
            kk[(size_t)i * (size_t)ksize + (size_t)x] = k[x] < 0 ? (int32_t)(-0.5 + k[x] * (1 << PRECISION_BITS))
                                                                : (int32_t)(0.5 + k[x] * (1 << PRECISION_BITS));
        bounds[i * 2] = xmin;
        bounds[i * 2 + 1] = xmax;
    }
    free(k);
    *bounds_out = bounds;
    *kk_out = kk;
    return ksize;
}

static inline uint8_t clip8(int32_t v) {
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One RGB pixel of a separable pass, PIL's fixed-point arithmetic: the n taps k over the
 * pixels p, p + step, p + 2*step... (step in bytes: 3 along a row, a row's bytes down a
 * column). */
static void filter_px(const uint8_t *p, size_t step, const int32_t *k, int n, uint8_t *o) {
    int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
    for (int i = 0; i < n; i++, p += step) {
        s0 += p[0] * k[i];
        s1 += p[1] * k[i];
        s2 += p[2] * k[i];
    }
    o[0] = clip8(s0);
    o[1] = clip8(s1);
    o[2] = clip8(s2);
}

/* Python's int(round(x / 2.0)) for an integer x >= 0: half to even. */
static int64_t half_round_even(int64_t x) {
    int64_t q = x / 2;
    return (x % 2 == 0 || q % 2 == 0) ? q : q + 1;
}

void image_resize_crop(const ImageRGB *in, int S, uint8_t *out) {
    /* 64-bit: the longer side's new length, S * long / short, passes 2^31 for a 1 x 2^20 image
     * at S = 4096. Only the S x S crop is ever computed: the coefficients of the S kept columns
     * and rows, and the horizontal pass on the input rows the kept rows read, as PIL's
     * resample does for its vertical pass; every output pixel is PIL's, which computes the
     * whole resized image and then crops it. */
    const int64_t w = in->w, h = in->h;
    int64_t nw, nh;
    if (w <= h) {
        nw = S;
        nh = (int64_t)S * h / w;
    } else {
        nh = S;
        nw = (int64_t)S * w / h;
    }
    const int64_t left = half_round_even(nw - S), top = half_round_even(nh - S);
    if (nw == w && nh == h) {   /* no resampling: PIL's resize returns a copy */
        for (int y = 0; y < S; y++)
            memcpy(out + (size_t)y * S * 3, in->rgb + ((size_t)(y + top) * (size_t)w + (size_t)left) * 3, (size_t)S * 3);
        return;
    }
    /* The input rows [y0, y1) the S output rows read. */
    int *vb = NULL;
    int32_t *vkk = NULL;
    int vks = 0;
    int64_t y0 = top, y1 = top + S;
    if (nh != h) {
        vks = coeffs(h, nh, top, S, &vb, &vkk);
        y0 = h;
        y1 = 0;
        for (int yo = 0; yo < S; yo++) {
            if (vb[yo * 2] < y0) y0 = vb[yo * 2];
            if (vb[yo * 2] + vb[yo * 2 + 1] > y1) y1 = vb[yo * 2] + vb[yo * 2 + 1];
        }
        if (y1 < y0) y1 = y0;
    }
    /* Horizontal pass over rows [y0, y1) (only the S output columns kept), into tmp
     * [y1 - y0][S]. src: row r of it is input row src_y0 + r; src_w pixels a row; output
     * column 0 is its column cols_off. */
    const uint8_t *src = in->rgb;
    int64_t src_w = w, src_y0 = 0, cols_off = 0;
    uint8_t *tmp = NULL;
    if (nw != w) {
        int *b;
        int32_t *kk;
        int ks = coeffs(w, nw, left, S, &b, &kk);
        tmp = mallocCheck((size_t)(y1 - y0) * (size_t)S * 3 + 1);
        for (int64_t y = y0; y < y1; y++) {
            const uint8_t *row = in->rgb + (size_t)y * (size_t)w * 3;
            for (int xo = 0; xo < S; xo++)
                filter_px(row + (size_t)b[xo * 2] * 3, 3, kk + (size_t)xo * (size_t)ks, b[xo * 2 + 1],
                          tmp + ((size_t)(y - y0) * (size_t)S + (size_t)xo) * 3);
        }
        free(b);
        free(kk);
        src = tmp;
        src_w = S;
        src_y0 = y0;
    } else {
        cols_off = left;
    }
    if (nh != h) {
        for (int yo = 0; yo < S; yo++) {
            const int64_t ymin = vb[yo * 2];
            const int32_t *k = vkk + (size_t)yo * (size_t)vks;
            for (int xo = 0; xo < S; xo++)
                filter_px(src + ((size_t)(ymin - src_y0) * (size_t)src_w + (size_t)(xo + cols_off)) * 3, (size_t)src_w * 3, k,
                          vb[yo * 2 + 1], out + ((size_t)yo * S + (size_t)xo) * 3);
        }
    } else {
        for (int y = 0; y < S; y++)
            memcpy(out + (size_t)y * S * 3, src + ((size_t)(y + top - src_y0) * (size_t)src_w + (size_t)cols_off) * 3,
                   (size_t)S * 3);
    }
    free(vb);
    free(vkk);
    free(tmp);
}
