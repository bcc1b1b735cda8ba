/* SPDX-License-Identifier: BSD-3-Clause */
/* image.c - JPEG (libjpeg API: libjpeg-turbo) and PNG (libpng) decoding to RGB, and PIL's
 * BILINEAR resize + centre crop. The rules are in image.h. */
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_config.h"
#include "resample.h"
#include "base/util.h"

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

/* What kind of file a mode is, for "not a regular file (...)". */
static const char *file_kind(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a folder" : S_ISCHR(m) ? "a character device" :
           S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a file";
}

/* Opens an image file for reading, a regular file only. O_NONBLOCK and the fstat after the
 * open cover a file replaced by a FIFO or a device between the stat and the open. Returns the
 * stream, or NULL with one line in err naming the file. */
static FILE *open_image_file(const char *path, char *err, size_t errlen) {
    char ebuf[128];   /* strerror's buffer is shared between threads */
    struct stat st;
    if (stat(path, &st) != 0) {
        const int e = errno;
        if (e == ENOENT && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            errf(err, errlen, "%s: a symbolic link to a missing file", QUOTED(path));
        else
            errf(err, errlen, "%s: cannot read: %s", QUOTED(path), strerror_r(e, ebuf, sizeof ebuf));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        errf(err, errlen, "%s: not a regular file (%s)", QUOTED(path), file_kind(st.st_mode));
        return NULL;
    }
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        errf(err, errlen, "%s: cannot read: %s", QUOTED(path), strerror_r(errno, ebuf, sizeof ebuf));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        errf(err, errlen, "%s: not a regular file (%s)", QUOTED(path), file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    /* A regular file never blocks: the flag is dropped so reads behave as usual. */
    CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0);
    FILE *f = fdopen(fd, "rb");
    CHECK(f != NULL);
    /* The decoders read 4 kB at a time: 64 kB per system call for shared file systems. */
    CHECK(setvbuf(f, NULL, _IOFBF, (size_t)1 << 16) == 0);
    return f;
}

int image_decode_path(const char *path, long long max_pixels, ImageRGB *out, char *err, size_t errlen) {
    out->w = out->h = 0;
    out->rgb = NULL;
    FILE *f = open_image_file(path, err, errlen);
    if (!f) return -1;
    char e[512];
    const int rc = image_decode_file(f, max_pixels, out, e, sizeof e);
    fclose(f);
    if (rc != 0) return errf(err, errlen, "%s: %s", QUOTED(path), e);
    return 0;
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

/* Python's int(round(x / 2.0)) for an integer x >= 0: half to even. */
static int64_t half_round_even(int64_t x) {
    int64_t q = x / 2;
    return (x % 2 == 0 || q % 2 == 0) ? q : q + 1;
}

void image_resize_crop(const ImageRGB *in, int S, uint8_t *out) {
    /* 64-bit: the longer side's new length, S * long / short, passes 2^31 for a 1 x 2^20 image
     * at S = 4096. Only the S x S crop is computed (resample.h): the coefficients of the kept
     * columns and rows, and the horizontal pass on the input rows the kept rows read; every
     * output pixel is PIL's, which resizes the whole image and then crops it. */
    const int64_t w = in->w, h = in->h;
    int64_t nw, nh;
    if (w <= h) {
        nw = S;
        nh = (int64_t)S * h / w;
    } else {
        nh = S;
        nw = (int64_t)S * w / h;
    }
    const PixelBox whole = {.x = 0, .y = 0, .w = in->w, .h = in->h};
    const PixelBox crop = {.x = half_round_even(nw - S), .y = half_round_even(nh - S), .w = S, .h = S};
    ResampleScratch scratch = {0};
    resample_box(in->rgb, in->w, in->h, whole, nw, nh, crop, out, &scratch);
    resample_scratch_free(&scratch);
}
