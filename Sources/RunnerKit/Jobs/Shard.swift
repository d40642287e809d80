/// One shard of N: the jobs whose key hashes to it, so N machines can split one batch with
/// no coordination (`--shard I/N`, I from 0 to N-1).
///
/// The hash is 64-bit FNV-1a over the key's UTF-8 bytes, taken modulo N: stable across runs,
/// machines and versions, and independent of the order of the jobs.
package struct Shard: Sendable, Equatable, CustomStringConvertible {
    package let index: Int
    package let count: Int

    package init?(index: Int, count: Int) {
        guard count >= 1, (0..<count).contains(index) else { return nil }
        self.index = index
        self.count = count
    }

    /// Parses "I/N".
    package init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]) else { return nil }
        self.init(index: index, count: count)
    }

    package func contains(key: String) -> Bool {
        Int(Self.hash(key) % UInt64(count)) == index
    }

    package static func hash(_ key: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    package var description: String { "\(index)/\(count)" }
}
