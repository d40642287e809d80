/// SHA-256 (FIPS 180-4), incremental, so a payload is hashed while it streams to disk.
///
/// With libcrypto in the process (`CryptoLibrary`), OpenSSL does the work, on the processor's
/// SHA instructions where it has them; else the code below does. The toolchain has no CryptoKit
/// on Linux and the project takes no packages. A hasher is a plain value either way: a copy
/// goes on from where the original was (`Payload` finishes a copy to tell the digest so far).
package struct SHA256: Sendable {
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19
    )
    private var buffer: [UInt8] = []
    private var length: UInt64 = 0
    /// OpenSSL's context when libcrypto does the work (the fields above are then unused).
    private var openSSL: OpenSSLContext?

    /// `SHA256_CTX` (112 bytes in OpenSSL 1.1 and 3, kept in 128), inside the value.
    private struct OpenSSLContext: Sendable {
        private let crypto: CryptoLibrary
        private var bytes: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                            UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

        init(_ crypto: CryptoLibrary) {
            self.crypto = crypto
            withUnsafeMutableBytes(of: &bytes) { _ = crypto.initialize($0.baseAddress) }
        }

        mutating func update(_ data: UnsafeRawBufferPointer) {
            guard let base = data.baseAddress, !data.isEmpty else { return }
            withUnsafeMutableBytes(of: &bytes) { _ = crypto.update($0.baseAddress, base, data.count) }
        }

        mutating func finalizeHex() -> String {
            var digest = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
            withUnsafeMutableBytes(of: &digest) { out in
                withUnsafeMutableBytes(of: &bytes) { _ = crypto.finish(out.baseAddress!.assumingMemoryBound(to: UInt8.self), $0.baseAddress) }
            }
            return withUnsafeBytes(of: digest) { SHA256.hex(digest: $0) }
        }
    }

    /// Whether hashers use libcrypto (else the code of this file).
    static var usesLibcrypto: Bool { CryptoLibrary.shared != nil }

    /// What hashes, in a line for `runner --version`.
    package static var implementation: String {
        if let crypto = CryptoLibrary.shared { return "sha256: \(crypto.name) (OpenSSL)" }
        return "sha256: built in (no libcrypto.so.3 or .so.1.1 to load; large payloads hash several times slower)"
    }

    package init() { self.init(portable: false) }

    /// With `portable`, the code of this file even when libcrypto is there (to compare the two).
    init(portable: Bool) {
        if !portable, let crypto = CryptoLibrary.shared {
            openSSL = OpenSSLContext(crypto)
        } else {
            buffer.reserveCapacity(64)
        }
    }

    /// Hex digest of `bytes` in one call.
    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var hasher = SHA256()
        if bytes.withContiguousStorageIfAvailable({ hasher.update(UnsafeRawBufferPointer($0)) }) == nil {
            hasher.update(Array(bytes))
        }
        return hasher.finalizeHex()
    }

    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { update(UnsafeRawBufferPointer($0)) }
    }

    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        if openSSL != nil {
            openSSL!.update(bytes)
            return
        }
        length &+= UInt64(bytes.count)
        var offset = 0
        if !buffer.isEmpty {
            let take = min(64 - buffer.count, bytes.count)
            buffer.append(contentsOf: bytes[0..<take])
            offset = take
            if buffer.count == 64 {
                buffer.withUnsafeBytes { compress($0.baseAddress!) }
                buffer.removeAll(keepingCapacity: true)
            }
        }
        while bytes.count - offset >= 64 {
            compress(bytes.baseAddress! + offset)
            offset += 64
        }
        if offset < bytes.count { buffer.append(contentsOf: bytes[offset...]) }
    }

    package mutating func finalizeHex() -> String {
        if openSSL != nil { return openSSL!.finalizeHex() }
        let bitLength = length &* 8
        var tail = buffer
        tail.append(0x80)
        while tail.count % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        tail.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                compress(raw.baseAddress! + offset)
                offset += 64
            }
        }
        buffer.removeAll()
        let words = (
            state.0.bigEndian, state.1.bigEndian, state.2.bigEndian, state.3.bigEndian,
            state.4.bigEndian, state.5.bigEndian, state.6.bigEndian, state.7.bigEndian
        )
        return withUnsafeBytes(of: words) { Self.hex(digest: $0) }
    }

    /// The 32 bytes of a digest as 64 lower-case hex digits.
    fileprivate static func hex(digest: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: 64) { out in
            for (index, byte) in digest.prefix(32).enumerated() {
                out[2 * index] = digits[Int(byte >> 4)]
                out[2 * index + 1] = digits[Int(byte & 0xF)]
            }
            return 64
        }
    }

    private static let digits = Array("0123456789abcdef".utf8)

    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// One 64-byte block. Works on a stack buffer and raw pointers, with no array in the loop,
    /// so even an unoptimized build hashes a large payload at a usable speed.
    private mutating func compress(_ block: UnsafeRawPointer) {
        var (a, b, c, d, e, f, g, h) = state
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            Self.k.withUnsafeBufferPointer { k in
                for i in 0..<16 {
                    w[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))
                }
                for i in 16..<64 {
                    let x = w[i - 15]
                    let y = w[i - 2]
                    let s0 = (x >> 7 | x << 25) ^ (x >> 18 | x << 14) ^ (x >> 3)
                    let s1 = (y >> 17 | y << 15) ^ (y >> 19 | y << 13) ^ (y >> 10)
                    w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
                }
                for i in 0..<64 {
                    let s1 = (e >> 6 | e << 26) ^ (e >> 11 | e << 21) ^ (e >> 25 | e << 7)
                    let ch = (e & f) ^ (~e & g)
                    let t1 = h &+ s1 &+ ch &+ k[i] &+ w[i]
                    let s0 = (a >> 2 | a << 30) ^ (a >> 13 | a << 19) ^ (a >> 22 | a << 10)
                    let maj = (a & b) ^ (a & c) ^ (b & c)
                    h = g; g = f; f = e; e = d &+ t1
                    d = c; c = b; b = a; a = t1 &+ s0 &+ maj
                }
            }
        }
        state = (
            state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d,
            state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h
        )
    }
}
