import Foundation
import RunnerKit
import Synchronization
import Testing

/// Payloads made to cost the parser: many members, duplicate names far apart, a caller that
/// gives up. The times are loose bounds (debug build, a busy machine) that the old quadratic
/// duplicate check missed by a factor of ten or more.
@Suite struct JSONHostileTests {
    /// `{"k0":0,"k1":1,…}` with `count` members; `duplicate` repeats the first name at the end.
    static func object(members count: Int, duplicate: Bool = false) -> [UInt8] {
        var text = "{"
        text.reserveCapacity(count * 14)
        for i in 0..<count {
            if i > 0 { text += "," }
            text += "\"k\(i)\":\(i)"
        }
        if duplicate { text += ",\"k0\":0" }
        text += "}"
        return Array(text.utf8)
    }

    @Test func anObjectOfTwoHundredThousandMembersParsesInLinearTime() throws {
        let bytes = Self.object(members: 200_000)
        let start = ContinuousClock.now
        let value = try JSONParser.parse(bytes)
        let elapsed = start.duration(to: .now)
        #expect(value.objectValue?.count == 200_000)
        #expect(value.objectValue?.last?.key == "k199999")
        // The quadratic check took about 70 s here; hashing takes well under a second.
        #expect(elapsed < .seconds(5), "took \(elapsed)")
    }

    @Test func aDuplicateFarApartInALargeObjectIsStillRefusedWithItsPlace() {
        let bytes = Self.object(members: 50_000, duplicate: true)
        let caught = #expect(throws: JSONParser.Error.self) { try JSONParser.parse(bytes) }
        #expect(caught?.message == "duplicate member \"k0\"")
        #expect(caught?.line == 1)
        #expect(caught?.column == bytes.count)  // just after the duplicate's value, before '}'
        #expect(caught?.isStopped == false)
    }

    @Test(arguments: [2, 15, 16, 17, 40])
    func duplicatesAreFoundAtEverySizeAroundTheSwitchToHashing(members: Int) {
        var text = (0..<members).map { "\"m\($0)\":null" }.joined(separator: ",")
        text = "{" + text + ",\"m\(members / 2)\":1}"
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(text) }
        let unique = "{" + (0...members).map { "\"m\($0)\":null" }.joined(separator: ",") + "}"
        #expect(throws: Never.self) { try JSONParser.parse(unique) }
    }

    @Test func aCallerCanStopTheParserPartWay() {
        let bytes = Self.object(members: 400_000)  // about 5 MiB
        let asked = Atomic<Int>(0)
        let caught = #expect(throws: JSONParser.Error.self) {
            try JSONParser.parse(bytes, shouldStop: { asked.add(1, ordering: .relaxed).newValue >= 3 })
        }
        #expect(caught?.isStopped == true)
        #expect(asked.load(ordering: .relaxed) == 3)
        // Asked every 64 KiB or so: stopped within the first few hundred KiB, not at the end.
        #expect((caught?.column ?? 0) < 4 * JSONParser.stopCheckInterval)
    }

    @Test func aParserThatIsNeverToldToStopFinishes() throws {
        let bytes = Self.object(members: 10_000)
        let asked = Atomic<Int>(0)
        let value = try JSONParser.parse(bytes, shouldStop: {
            asked.add(1, ordering: .relaxed)
            return false
        })
        #expect(value.objectValue?.count == 10_000)
        #expect(asked.load(ordering: .relaxed) >= bytes.count / JSONParser.stopCheckInterval)
    }

    @Test func integersTakeTheFastPathWithTheSameValues() throws {
        for text in ["0", "-0", "7", "-42", "999999999999999", "-999999999999999", "1234567890123456", "12345678901234567890", "1.5", "1e3", "-0.0"] {
            let parsed = try JSONParser.parse(text)
            #expect(parsed == .number(Double(text)!), "\(text)")
            if case .number(let value) = parsed { #expect(value.sign == Double(text)!.sign, "\(text)") }
        }
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse("-") }
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse("012") }
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse("1" + String(repeating: "0", count: 400)) }
    }
}
