import Foundation
import RunnerKit
import Testing

/// Measurements of the parser on hostile shapes, printed as table rows by
/// Tests/Benchmarks/json-parse.sh (RUNNER_BENCH=1, release build); skipped otherwise.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["RUNNER_BENCH"] != nil))
struct JSONParseBenchmarkTests {
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// One object of `count` members `"k<i>":1`, the numbers padded with zeros to `nameWidth` digits.
    static func object(members count: Int, nameWidth: Int = 0) -> [UInt8] {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(count * (nameWidth + 12))
        for i in 0..<count {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            let digits = String(i)
            bytes.append(UInt8(ascii: "\""))
            bytes.append(UInt8(ascii: "k"))
            if nameWidth > digits.utf8.count { bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: nameWidth - digits.utf8.count)) }
            bytes.append(contentsOf: digits.utf8)
            bytes.append(contentsOf: "\":1".utf8)
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// The process's peak resident memory so far (VmHWM), in MiB.
    static func peakMiB() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kB = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { return 0 }
        return kB / 1024
    }

    func measure(_ label: String, _ bytes: [UInt8]) throws {
        let start = ContinuousClock.now
        let value = try JSONParser.parse(bytes)
        let elapsed = Self.seconds(start.duration(to: .now))
        let members = value.objectValue?.count ?? 0
        print(String(format: "| %@ | %.1f MiB | %d | %.2f s | %.0f MiB | < 2 s |", label, Double(bytes.count) / 1_048_576, members, elapsed, Self.peakMiB()))
    }

    @Test func objectsOfManyMembers() throws {
        print("| payload | size | members | parse time | peak RSS of the process so far | target |")
        print("| --- | --- | --- | --- | --- | --- |")
        try measure("object, 200 000 members", Self.object(members: 200_000))
        try measure("object, 800 000 members", Self.object(members: 800_000))
        // 64 MiB: names of 10 digits, `"k0000000001":1,` is 16 bytes a member.
        let count = 64 * 1_048_576 / 16
        try measure("object of 64 MiB", Self.object(members: count, nameWidth: 10))
        var last = Self.object(members: count, nameWidth: 10)
        // The same object with its last name changed to the first: refused, after a full pass.
        let firstName = Array("\"k0000000000\"".utf8)
        var cut = last.count - 1
        while last[cut] != UInt8(ascii: ",") { cut -= 1 }
        last.replaceSubrange((cut + 1)..<(cut + 1 + firstName.count), with: firstName)
        let start = ContinuousClock.now
        let refused = (try? JSONParser.parse(last)) == nil
        let elapsed = Self.seconds(start.duration(to: .now))
        print(String(format: "| object of 64 MiB, last name a duplicate (refused: %@) | %.1f MiB | %d | %.2f s | %.0f MiB | < 2 s |",
                     refused ? "yes" : "NO", Double(last.count) / 1_048_576, count, elapsed, Self.peakMiB()))
        #expect(refused)
    }
}
