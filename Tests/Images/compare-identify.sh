#!/usr/bin/env bash
# The image kind against real encoders and ImageMagick's identify.
#
# Makes images with Debian's encoders (ImageMagick's convert, avifenc, heif-enc, cjxl, img2webp,
# gif2webp, apngasm) in every format the image kind accepts, serves them on loopback (a python3
# static file server on 127.0.0.1, a free port, that notes each request's Accept header), runs
# one `runner run --json` over them, and compares each result record with what identify reports:
# format, width and height (for a GIF the logical screen, for an ICO or CUR the largest image
# inside), frames where identify counts them (GIF, WebP), and EXIF orientation. JPEG XL sizes
# and animation frames come from jxlinfo (this ImageMagick has no JPEG XL coder); APNG and AVIF
# sequence frame counts from the number of frames encoded (identify reads one frame of each).
#
# Also: a GIF without its trailer byte succeeds, one cut inside a frame fails, a PNG header
# declaring 100000x100000 fails as a decompression bomb and leaves no payload, SVG fails naming
# SVG, `formats` refuses what it does not list, and every request's Accept header names the
# accepted formats (AVIF, WebP and JPEG XL included; only PNG and JPEG for a job listing those).
#
# Extra folders given as arguments are compared too (every file identify can read), e.g. the
# images of installed packages.
#
# Usage: Tests/Images/compare-identify.sh [FOLDER…]   (RUNNER_BIN defaults to .build/debug/runner)
# Exit: 0 when every record agrees, 1 otherwise.
set -euo pipefail

RUNNER_BIN=${RUNNER_BIN:-.build/debug/runner}
case $RUNNER_BIN in /*) ;; *) RUNNER_BIN="$PWD/$RUNNER_BIN" ;; esac
[ -x "$RUNNER_BIN" ] || { echo "FAIL: no runner binary at $RUNNER_BIN (build it, or set RUNNER_BIN)"; exit 1; }
for tool in convert identify avifenc heif-enc cjxl jxlinfo img2webp gif2webp apngasm python3; do
    command -v "$tool" >/dev/null 2>&1 || { echo "FAIL: $tool is missing (.ci/run installs it)"; exit 1; }
done

work=$(mktemp -d)
server_pid=
cleanup() {
    local status=$?
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
files=$work/files
mkdir -p "$files"
cd "$files"

# MARK: - Images from the encoders

# The expected frame count of files identify cannot count; name<TAB>frames.
: > "$work/frames.tsv"
frames() { printf '%s\t%s\n' "$1" "$2" >> "$work/frames.tsv"; }

gradient() { convert -size "$1" "gradient:$2" -depth 8 -type TrueColor "PNG24:$3"; }
gradient 37x23 red-blue frame1.png
gradient 37x23 green-yellow frame2.png
gradient 37x23 white-black frame3.png
gradient 131x77 orange-navy big.png
noise() { convert -size "$1" xc: +noise Random -depth 8 -type TrueColor "PNG24:$2"; }

convert big.png png-plain.png
convert big.png -interlace PNG png-interlaced.png
apngasm apng.png frame1.png frame2.png frame3.png 1 10 >/dev/null; frames apng.png 3
convert big.png jpeg-baseline.jpg
convert big.png -interlace Plane jpeg-progressive.jpg
convert big.png -colorspace Gray jpeg-gray.jpg
convert big.png gif-still.gif
convert -delay 10 frame1.png frame2.png frame3.png gif-animated.gif
# A screen larger than its frames: identify's page size is the screen.
convert -delay 10 -page 50x40+0+0 frame1.png -page +5+5 frame2.png gif-screen.gif
# The GIF trailer byte cut off, as CPython's idlelib icons shipped.
head -c -1 gif-still.gif > gif-no-trailer.gif
noise 400x300 n1.png; noise 400x300 n2.png; noise 400x300 n3.png
convert -delay 10 n1.png n2.png n3.png gif-large.gif   # past the 512 KiB the runner sniffs first
convert big.png -quality 80 webp-lossy.webp
convert big.png -define webp:lossless=true webp-lossless.webp
convert big.png -alpha set -channel A -evaluate set 50% webp-alpha.webp
img2webp -o webp-animated.webp frame1.png frame2.png frame3.png >/dev/null 2>&1
gif2webp gif-animated.gif -o webp-from-gif.webp >/dev/null 2>&1
convert big.png BMP3:bmp-v3.bmp
convert big.png bmp-v5.bmp
convert big.png -endian LSB tiff-little.tif
convert big.png -endian MSB tiff-big.tif
convert big.png -compress lzw -define tiff:rows-per-strip=4 tiff-strips.tif
convert n1.png tiff-large.tif                          # its IFD lies past the first 512 KiB
convert big.png -orient LeftBottom tiff-orient8.tif
convert big.png -define icon:auto-resize=64,48,32,16 ico-sizes.ico
convert -size 256x256 gradient:red-blue -define icon:auto-resize=256,32 ico-png.ico
# ImageMagick writes .cur files as icons (type 1); make it a cursor (type 2, hotspot 3,4).
convert frame1.png cur-plain.ico
python3 - cur-plain.ico cur.cur <<'PY'
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
d[2] = 2; d[10:12] = (3).to_bytes(2, 'little'); d[12:14] = (4).to_bytes(2, 'little')
open(sys.argv[2], 'wb').write(d)
PY
rm cur-plain.ico
heif-enc -q 50 -o heic-still.heic big.png >/dev/null
heif-enc -q 50 -o heic-small.heic frame1.png >/dev/null
convert -size 700x500 gradient:red-blue -depth 8 PNG24:large-gradient.png
heif-enc -q 30 -o heic-grid.heic large-gradient.png >/dev/null   # tiled into a grid item
avifenc -s 10 big.png avif-still.avif >/dev/null
avifenc -s 10 -l big.png avif-lossless.avif >/dev/null
avifenc -s 10 frame1.png frame2.png frame3.png avif-sequence.avif >/dev/null; frames avif-sequence.avif 3
cjxl big.png jxl-codestream.jxl >/dev/null 2>&1
cjxl --container=1 big.png jxl-container.jxl >/dev/null 2>&1
cjxl -d 0 frame1.png jxl-lossless.jxl >/dev/null 2>&1
cjxl jpeg-baseline.jpg jxl-from-jpeg.jxl >/dev/null 2>&1   # lossless JPEG recompression: a container
# Bare codestreams whose end only their frames' tables of contents tell: several frames, an LF
# frame (progressive DC), progressive passes.
cjxl gif-animated.gif jxl-animated.jxl >/dev/null 2>&1
cjxl --progressive_dc=1 large-gradient.png jxl-lf-frame.jxl >/dev/null 2>&1
cjxl -p large-gradient.png jxl-progressive.jxl >/dev/null 2>&1
# EXIF orientation in a JPEG: an APP1 segment after SOI (ImageMagick keeps none when asked).
python3 - jpeg-baseline.jpg <<'PY'
import struct, sys
src = open(sys.argv[1], 'rb').read()
for value, order in ((6, '>'), (8, '<'), (3, '>')):
    bom = b'MM' if order == '>' else b'II'
    tiff = bom + struct.pack(order + 'HI', 42, 8) + struct.pack(order + 'H', 1)
    tiff += struct.pack(order + 'HHIHH', 274, 3, 1, value, 0) + struct.pack(order + 'I', 0)
    app1 = b'Exif\0\0' + tiff
    out = src[:2] + b'\xff\xe1' + struct.pack('>H', len(app1) + 2) + app1 + src[2:]
    open('jpeg-orient%d.jpg' % value, 'wb').write(out)
PY
# MARK: - Files as real writers leave them: lenient where decoders are

# A PNG with bytes after IEND (a web script's trailing newline, a comment), and icons whose
# directory entry disagrees with the BMP inside (identify: the entry, never larger than the image).
{ cat big.png; printf '\n'; } > png-trailing-newline.png
{ cat big.png; printf '<!-- served by a script -->\r\n'; } > png-trailing-text.png
# A JPEG with stray bytes before a marker, as some editors and cameras write (libjpeg warns
# "extraneous bytes before marker" and decodes it).
python3 - jpeg-baseline.jpg jpeg-stray-bytes.jpg <<'PY'
import struct, sys
src = open(sys.argv[1], 'rb').read()
at = 4 + struct.unpack('>H', src[4:6])[0]   # after the first segment following SOI
open(sys.argv[2], 'wb').write(src[:at] + b'\x00\x11\x22' + src[at:])
PY
# A GIF with a second header written into its stream after the first frame (two files
# concatenated, the first without its trailer): passed over, the frame after it counted.
python3 - gif-still.gif gif-second-header.gif <<'PY'
import sys
one = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(one[:-1] + one)
PY
# BigTIFF (8-byte offsets; identify calls it TIFF64).
convert big.png TIFF64:tiff-bigtiff.tif
convert frame1.png -resize 32x32! -define icon:auto-resize=32 ico-bmp-32.ico
python3 - ico-bmp-32.ico <<'PY'
import sys
src = bytearray(open(sys.argv[1], 'rb').read())
for side, name in ((64, 'ico-entry-larger.ico'), (16, 'ico-entry-smaller.ico')):
    out = bytearray(src); out[6] = side; out[7] = side
    open(name, 'wb').write(out)
PY
rm -f frame1.png frame2.png frame3.png n1.png n2.png n3.png large-gradient.png
generated=$(ls | wc -l)

# Cases that must fail.
mkdir -p "$work/bad"
head -c -40 gif-animated.gif > "$work/bad/gif-cut-in-frame.gif"
# A bare JPEG XL codestream has no end marker: cut right after its size header, or inside its
# last frame, it must still fail.
head -c 24 jxl-codestream.jxl > "$work/bad/jxl-cut-after-header.jxl"
head -c -10 jxl-animated.jxl > "$work/bad/jxl-cut-in-last-frame.jxl"
python3 - "$work/bad/png-bomb.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
ihdr = struct.pack('>IIBBBBB', 100000, 100000, 8, 2, 0, 0, 0)
idat = zlib.compress(b'\0' * 64)
open(sys.argv[1], 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', ihdr) + chunk(b'IDAT', idat) + chunk(b'IEND', b''))
PY
# A BMP with two colour planes: decoders refuse it, so does the runner, saying why.
python3 - "$work/bad/bmp-two-planes.bmp" <<'PY'
import struct, sys
pixels = b'\0' * 12 * 3
header = struct.pack('<IiiHHIIiiII', 40, 4, 3, 2, 24, 0, len(pixels), 0, 0, 0, 0)
open(sys.argv[1], 'wb').write(b'BM' + struct.pack('<IHHI', 14 + len(header) + len(pixels), 0, 0, 54) + header + pixels)
PY
printf '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>\n' > "$work/bad/vector.svg"
cp gif-still.gif "$work/bad/gif-not-listed.gif"

# Extra folders: their image files, linked in under unique names.
index=0
for folder in "$@"; do
    while IFS= read -r -d '' file; do
        index=$((index + 1))
        ln -s "$file" "$files/extra-$index-$(basename "$file")"
    done < <(find "$folder" -type f \( -iname '*.png' -o -iname '*.gif' -o -iname '*.jp*g' -o -iname '*.bmp' \
        -o -iname '*.webp' -o -iname '*.tif*' -o -iname '*.ico' -o -iname '*.cur' -o -iname '*.heic' \
        -o -iname '*.avif' -o -iname '*.jxl' \) -print0)
done

# MARK: - Serve and run

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
# A static file server that notes each request's Accept header (path<TAB>accept) in accept.tsv.
(cd "$work" && exec python3 - "$port" >/dev/null 2>&1 <<'PY'
import http.server, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        with open('accept.tsv', 'a') as log:
            log.write('%s\t%s\n' % (self.path, self.headers.get('Accept', '')))
        super().do_GET()
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), Handler).serve_forever()
PY
) &
server_pid=$!
for _ in $(seq 50); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
    sleep 0.1
done

python3 - "$work" "$port" > "$work/jobs.jsonl" <<'PY'
import json, os, sys, urllib.parse
work, port = sys.argv[1], sys.argv[2]
base = 'http://127.0.0.1:%s/' % port
for folder in ('files', 'bad'):
    for name in sorted(os.listdir(os.path.join(work, folder))):
        # A generous deadline: the machine may be busy, and this compares formats, not speed.
        job = {'kind': 'image', 'key': 'image:%s/%s' % (folder, name), 'url': base + folder + '/' + urllib.parse.quote(name),
               'timeout': 30}
        if name == 'gif-not-listed.gif':
            job['formats'] = ['png', 'jpeg']
        print(json.dumps(job))
PY
set +e
"$RUNNER_BIN" run "$work/jobs.jsonl" --out "$work/out" --json > "$work/records.jsonl" 2> "$work/stderr.txt"
set -e

# MARK: - Compare

python3 - "$work" <<'PY'
import json, os, re, subprocess, sys
work = sys.argv[1]
records = {}
for line in open(os.path.join(work, 'records.jsonl')):
    line = line.strip()
    if line.startswith('{'):
        record = json.loads(line)
        records[record['key']] = record
encoded = dict(line.rstrip('\n').split('\t') for line in open(os.path.join(work, 'frames.tsv')))
orientations = {'TopLeft': 1, 'TopRight': 2, 'BottomRight': 3, 'BottomLeft': 4,
                'LeftTop': 5, 'RightTop': 6, 'RightBottom': 7, 'LeftBottom': 8}
formats = {'PNG': {'png'}, 'JPEG': {'jpeg'}, 'GIF': {'gif'}, 'WEBP': {'webp'}, 'BMP': {'bmp'}, 'BMP3': {'bmp'},
           'TIFF': {'tiff'}, 'TIFF64': {'tiff'}, 'ICO': {'ico', 'cur'}, 'CUR': {'ico', 'cur'}, 'HEIC': {'heic', 'avif'}, 'AVIF': {'avif'}}
failures, compared, skipped = [], 0, 0

def identify(path):
    # One line per frame (per image of an icon): format, size, screen size, orientation.
    result = subprocess.run(['identify', '-format', '%m %w %h %W %H %[orientation]\n', path],
                            capture_output=True, text=True, timeout=60)
    return [line.split() for line in result.stdout.splitlines() if line.strip()]

for name in sorted(os.listdir(os.path.join(work, 'files'))):
    path = os.path.join(work, 'files', name)
    record = records.get('image:files/' + name)
    if record is None:
        failures.append('%s: no record' % name); continue
    details = record.get('details') or {}
    frames = 1
    if name.endswith('.jxl'):
        info = subprocess.run(['jxlinfo', path], capture_output=True, text=True).stdout
        match = re.search(r'JPEG XL (?:image|animation), (\d+)x(\d+)', info)
        if not match:
            failures.append('%s: jxlinfo reads no size' % name); continue
        expected = ({'jxl'}, int(match.group(1)), int(match.group(2)), None)
        # An animation's shown frames ("layer:" lines are blended into the next frame).
        if 'JPEG XL animation' in info:
            frames = sum(1 for line in info.splitlines() if line.startswith('frame:'))
    else:
        lines = identify(path)
        if not lines:
            if name.startswith('extra-'):
                skipped += 1; continue
            failures.append('%s: identify reads nothing' % name); continue
        kind = lines[0][0]
        if kind in ('ICO', 'CUR') or (name.endswith(('.ico', '.cur')) and len(lines) > 1):
            best = max(lines, key=lambda l: int(l[1]) * int(l[2]))
            width, height = int(best[1]), int(best[2])
            kind = 'ICO'
        elif kind == 'GIF':
            width, height = int(lines[0][3]), int(lines[0][4])
        else:
            width, height = int(lines[0][1]), int(lines[0][2])
        if kind in ('GIF', 'WEBP'):
            frames = len(lines)
        orientation = orientations.get(lines[0][5]) if len(lines[0]) > 5 else None
        expected = (formats.get(kind, {kind.lower()}), width, height, orientation)
    frames = int(encoded.get(name, frames))
    accepted, width, height, orientation = expected
    got = (details.get('format'), details.get('width'), details.get('height'), details.get('frames', 1),
           details.get('orientation', 1))
    wrong = []
    if record['status'] != 'succeeded':
        wrong.append('status %s (%s)' % (record['status'], record.get('error')))
    if got[0] not in accepted: wrong.append('format %s, identify %s' % (got[0], '/'.join(sorted(accepted))))
    if (got[1], got[2]) != (width, height): wrong.append('size %sx%s, identify %dx%d' % (got[1], got[2], width, height))
    if got[3] != frames: wrong.append('frames %s, expected %d' % (got[3], frames))
    if orientation is not None and got[4] != orientation: wrong.append('orientation %s, identify %d' % (got[4], orientation))
    if details.get('animated', False) != (frames > 1): wrong.append('animated %s' % details.get('animated'))
    if got[4] >= 5 and (details.get('displayWidth'), details.get('displayHeight')) != (height, width):
        wrong.append('display size %sx%s' % (details.get('displayWidth'), details.get('displayHeight')))
    compared += 1
    if wrong:
        failures.append('%s: %s' % (name, '; '.join(wrong)))
    elif not name.startswith('extra-'):
        print('ok   %-28s %-5s %4dx%-4d frames %d%s' % (name, got[0], width, height, got[3],
              ' orientation %d' % got[4] if got[4] != 1 else ''))

bad = {
    'gif-cut-in-frame.gif': 'truncated',
    'jxl-cut-after-header.jxl': 'truncated',
    'jxl-cut-in-last-frame.jxl': 'truncated',
    'png-bomb.png': 'decompression bomb',
    'vector.svg': 'SVG',
    'gif-not-listed.gif': 'expected an image in PNG or JPEG, but a GIF image',
    'bmp-two-planes.bmp': '2 colour planes',
}
for name, phrase in bad.items():
    record = records.get('image:bad/' + name)
    if record is None:
        failures.append('%s: no record' % name); continue
    error = record.get('error') or ''
    if record['status'] != 'failed' or phrase not in error:
        failures.append('%s: %s (%s), expected failed with "%s"' % (name, record['status'], error, phrase))
    else:
        print('ok   %-28s failed: %s' % (name, error))
if any(name.startswith('png-bomb') for name in os.listdir(os.path.join(work, 'out', 'images'))):
    failures.append('png-bomb.png: a payload was written')

# The Accept header names the accepted formats, AVIF and WebP included, or only those a job lists.
accepts = dict(line.rstrip('\n').split('\t', 1) for line in open(os.path.join(work, 'accept.tsv')))
for path, accept in sorted(accepts.items()):
    listed = path.endswith('gif-not-listed.gif')
    expected = 'image/apng,image/png,image/jpeg,*/*;q=0.8' if listed else None
    if listed and accept != expected or not listed and not ('image/avif' in accept and 'image/webp' in accept and 'image/jxl' in accept):
        failures.append('%s: requested with Accept: %s' % (path, accept))
print('ok   every request named the accepted formats: %s' % accepts.get('/files/big.png'))

print('%d images compared with identify, %d unreadable by identify skipped, %d failures' % (compared, skipped, len(failures)))
for failure in failures:
    print('FAIL ' + failure)
sys.exit(1 if failures else 0)
PY
