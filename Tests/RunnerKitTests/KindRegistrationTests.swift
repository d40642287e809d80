import RunnerKit
import Testing

// A kind's declaration (the parameters it lists) is checked against what its decoder reads when
// the kind is registered: a mistake is a thrown error naming the kind and the field, never a stop
// of the program at the kind's first job.

/// Lists `id` as string or int but reads it as a string.
private struct SloppyKind: JobKind {
    static let name = "sloppy"
    static let summary = "Reads a field as another type than it lists."
    static let parameters = [KindParameter("id", type: .identifier, "An id.")]
    init(fields: inout JobFields) throws(JobSpecError) { _ = try fields.string("id") }
    func run(in context: JobContext) async throws -> KindOutcome { throw JobFailure.failed("never runs") }
}

/// Reads a field it does not list.
private struct UnlistedKind: JobKind {
    static let name = "unlisted"
    static let summary = "Reads a field it does not list."
    static let parameters: [KindParameter] = []
    init(fields: inout JobFields) throws(JobSpecError) { _ = try fields.int("size") }
    func run(in context: JobContext) async throws -> KindOutcome { throw JobFailure.failed("never runs") }
}

/// Lists a field it never reads.
private struct ForgetfulKind: JobKind {
    static let name = "forgetful"
    static let summary = "Lists a field it never reads."
    static let parameters = [KindParameter("size", type: .int, "A size.")]
    init(fields: inout JobFields) throws(JobSpecError) {}
    func run(in context: JobContext) async throws -> KindOutcome { throw JobFailure.failed("never runs") }
}

/// Requires `name`, and reads it as optional.
private struct NamedKind: JobKind {
    static let name = "named"
    static let summary = "Requires a name."
    static let parameters = [KindParameter("name", type: .string, required: true, "A name.")]
    let name: String?
    init(fields: inout JobFields) throws(JobSpecError) { name = try fields.string("name") }
    func run(in context: JobContext) async throws -> KindOutcome { throw JobFailure.failed("never runs") }
}

@Suite struct KindRegistrationTests {
    func refusal<Kind: JobKind>(_ kind: Kind.Type) -> KindDeclarationError? {
        var registry = KindRegistry()
        do {
            try registry.register(kind)
            return nil
        } catch {
            return error as? KindDeclarationError
        }
    }

    @Test func aKindReadingAFieldAsAnotherTypeIsRefusedWhenRegistered() throws {
        let error = try #require(refusal(SloppyKind.self))
        #expect(error.kind == "sloppy" && error.field == "id")
        #expect(error.description == "kind 'sloppy' lists 'id' as string or int but reads it as string")
    }

    @Test func aKindReadingAFieldItDoesNotListIsRefused() throws {
        let error = try #require(refusal(UnlistedKind.self))
        #expect(error.kind == "unlisted" && error.field == "size")
    }

    @Test func aKindListingAFieldItNeverReadsIsRefused() throws {
        let error = try #require(refusal(ForgetfulKind.self))
        #expect(error.kind == "forgetful" && error.field == "size")
    }

    @Test func aWellDeclaredKindRegisters() {
        #expect(refusal(NamedKind.self) == nil)
    }

    @Test func aJobOfAnUnregisteredSloppyKindIsRefusedNotAStopOfTheProgram() throws {
        var fields = JobFields([("id", .string("1"))])
        #expect(throws: JobSpecError.self) { _ = try KindDefinition(SloppyKind.self).decode(&fields) }
    }

    @Test func requiredIsEnforcedForCompiledKinds() throws {
        var registry = KindRegistry()
        try registry.register(NamedKind.self)
        #expect {
            _ = try JobDescriptor.decode([("kind", .string("named")), ("url", .string("http://host.test/"))], registry: registry)
        } throws: { error in
            (error as? JobSpecError)?.field == "name"
        }
        _ = try JobDescriptor.decode([("kind", .string("named")), ("url", .string("http://host.test/")), ("name", .string("n"))], registry: registry)
    }
}
