@testable import RunnerKit
import Testing

/// The index `run` keeps of the record files that exist: never "surely not" for a name it was
/// given, and seldom "maybe" for one it was not.
struct RecordNamesTests {
    @Test func aNameGivenIsAlwaysMaybeAndFewOthersAre() {
        var names = RecordNames((0..<50_000).map { "entry_e\($0)-abcdef0123.json" })
        #expect((0..<50_000).allSatisfy { names.mayContain("entry_e\($0)-abcdef0123.json") })
        names.insert("written-later.json")
        #expect(names.mayContain("written-later.json"))
        let strangers = (0..<50_000).filter { names.mayContain("other_\($0).json") }.count
        #expect(strangers < 2_000, "about 0.6 % expected for 50 000 names in 8 Mi bits, found \(strangers)")
    }
}
