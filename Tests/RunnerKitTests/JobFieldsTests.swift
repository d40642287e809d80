import RunnerKit
import Testing

/// The fields of one job object: the job over its defaults, null as absent, unknown fields in
/// the job's order, defaults never unknown.
@Suite struct JobFieldsTests {
    @Test func theJobWinsOverDefaultsAndNullIsAbsent() throws {
        var fields = JobFields(
            [("url", .string("http://h/1")), ("timeout", .number(3)), ("flavor", .null)],
            defaults: [("timeout", .number(5)), ("retries", .number(2)), ("flavor", .string("d")), ("retries", .number(4))])
        #expect(try fields.number("timeout") == 3)
        #expect(try fields.int("retries") == 4)
        #expect(fields.has("url") && fields.has("retries"))
        #expect(!fields.has("flavor") && !fields.has("missing"))
        #expect(try fields.string("flavor") == nil)
        #expect(try fields.string("missing") == nil)
    }

    @Test func unknownFieldsAreTheJobsOwnUnreadOnesInItsOrder() throws {
        var fields = JobFields(
            [("kind", .string("k")), ("zeta", .number(1)), ("url", .string("u")), ("alpha", .bool(true))],
            defaults: [("beta", .number(1)), ("zeta", .number(2))])
        _ = try fields.string("kind")
        _ = try fields.string("url")
        #expect(fields.firstUnknownField() == "zeta")
        _ = fields.value("zeta")
        #expect(fields.firstUnknownField() == "alpha")
        _ = try fields.bool("alpha")
        #expect(fields.firstUnknownField() == nil)
    }

    @Test func aFieldSetToNullIsStillKnownOnceRead() throws {
        var fields = JobFields([("output", .null)])
        #expect(fields.firstUnknownField() == "output")
        #expect(try fields.string("output") == nil)
        #expect(fields.firstUnknownField() == nil)
    }

    @Test func mistypedAndMissingFieldsSaySo() throws {
        var fields = JobFields([("retries", .string("3")), ("kind", .string(""))])
        #expect(throws: JobSpecError(field: "retries", "must be a whole number, not a string")) { try fields.int("retries") }
        #expect(throws: JobSpecError(field: "kind", "must not be empty")) { try fields.requiredString("kind") }
        #expect(throws: JobSpecError(field: "url", "is missing")) { try fields.requiredString("url") }
        #expect(try fields.identifier("missing") == nil)
    }
}
