import Foundation
import Glibc
@testable import RunnerKit
import Testing

/// Both implementations (libcrypto's, when this machine has it, and the portable one) against
/// the FIPS vectors and against each other.
@Suite struct SHA256Tests {
    /// `portable: false` is libcrypto's where it can be loaded.
    static let implementations = [false, true]

    @Test(arguments: implementations, [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func knownVectors(portable: Bool, vector: (input: String, digest: String)) {
        var hasher = SHA256(portable: portable)
        hasher.update(Array(vector.input.utf8))
        #expect(hasher.finalizeHex() == vector.digest)
    }

    @Test(arguments: implementations)
    func incrementalEqualsOneShot(portable: Bool) {
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var hasher = SHA256(portable: portable)
        var offset = 0
        for size in [1, 63, 64, 65, 1000, 3, 0] + Array(repeating: 997, count: 20) where offset < bytes.count {
            let end = min(bytes.count, offset + size)
            hasher.update(Array(bytes[offset..<end]))
            offset = end
        }
        hasher.update(Array(bytes[offset...]))
        #expect(hasher.finalizeHex() == SHA256.hex(bytes))
        // one million 'a': the FIPS long-message vector
        var million = SHA256(portable: portable)
        let chunk = [UInt8](repeating: 0x61, count: 1000)
        for _ in 0..<1000 { million.update(chunk) }
        #expect(million.finalizeHex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test(arguments: implementations)
    func aCopyGoesOnFromWhereTheOriginalWas(portable: Bool) {
        var hasher = SHA256(portable: portable)
        hasher.update(Array("abc".utf8))
        var copy = hasher
        #expect(copy.finalizeHex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        hasher.update(Array("dbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
        #expect(hasher.finalizeHex() == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func bothImplementationsAgreeOnEveryLengthAndSplit() {
        var generator = SystemRandomNumberGenerator()
        for length in Array(0...200) + [1000, 4095, 4096, 65_537] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var native = SHA256()
            var portable = SHA256(portable: true)
            var offset = 0
            while offset < length {
                let end = min(length, offset + Int.random(in: 1...130, using: &generator))
                native.update(Array(bytes[offset..<end]))
                portable.update(Array(bytes[offset..<end]))
                offset = end
            }
            let a = native.finalizeHex()
            let b = portable.finalizeHex()
            #expect(a == b, "length \(length)")
            if a != b { return }
        }
    }

    /// The tests run with Debian's libcurl4, built on OpenSSL: its libcrypto is on the machine,
    /// and the hash must come from it.
    @Test func libcryptoIsUsedWhereTheMachineHasIt() {
        let present = CryptoLibrary.names.contains { name in
            guard let handle = dlopen(name, RTLD_LAZY) else { return false }
            dlclose(handle)
            return true
        }
        #expect(present, "no libcrypto on this machine (libcurl4 brings it)")
        #expect(SHA256.usesLibcrypto == present)
    }
}
