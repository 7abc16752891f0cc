package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Record2;
import org.jooq.TableField;
import org.jooq.UniqueKey;
import org.jooq.conf.Settings;
import org.jooq.exception.DataChangedException;
import org.jooq.exception.IntegrityConstraintViolationException;
import org.jooq.impl.DSL;
import org.jooq.impl.Internal;
import org.jooq.impl.SQLDataType;
import org.jooq.impl.TableImpl;
import org.jooq.impl.UpdatableRecordImpl;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What the README says about jOOQ's own optimistic locking, checked against the jOOQ this module
 * builds with: where {@code UpdatableRecord.store()} with a version field refuses a stale write,
 * and where the same stale write goes through or vanishes without an exception. Each test runs the
 * same story: I read the book at version 1, another writer stores it (version 2), then I write my
 * stale copy. The table class is what jOOQ's code generator would write with {@code
 * <recordVersionFields>version</recordVersionFields>}.
 */
@ExtendWith(PostgresExtension.class)
class JooqOptimisticLockingComparisonIT {

  private static final Books BOOKS = Books.BOOKS;

  private final PostgresSchema schema;
  private final DSLContext defaults;
  private final DSLContext optimistic;

  JooqOptimisticLockingComparisonIT(PostgresSchema schema) {
    this.schema = schema;
    this.defaults = schema.dsl();
    this.optimistic =
        schema
            .dsl()
            .configuration()
            .derive(new Settings().withExecuteWithOptimisticLocking(true))
            .dsl();
  }

  @BeforeEach
  void oneBookAtVersionOne() {
    defaults.execute(
        "CREATE TABLE IF NOT EXISTS books"
            + " (id bigint PRIMARY KEY, version bigint NOT NULL, title text NOT NULL)");
    defaults.execute("DELETE FROM books");
    defaults.execute("INSERT INTO books VALUES (1, 1, 'first')");
  }

  private BookRecord fetch(DSLContext dsl) {
    return dsl.fetchSingle(BOOKS, BOOKS.ID.eq(1L));
  }

  private void anotherWriterStoresTheBook() {
    BookRecord other = fetch(optimistic);
    other.setTitle("other writer");
    other.store();
  }

  private Record2<Long, String> row() {
    return defaults
        .select(BOOKS.VERSION, BOOKS.TITLE)
        .from(BOOKS)
        .where(BOOKS.ID.eq(1L))
        .fetchSingle();
  }

  private void assertRow(long version, String title) {
    assertThat(row().value1()).as("version").isEqualTo(version);
    assertThat(row().value2()).as("title").isEqualTo(title);
  }

  @Test
  void storeOfAStaleRecordIsRefusedWhenOptimisticLockingIsOn() {
    BookRecord mine = fetch(optimistic);
    anotherWriterStoresTheBook();
    mine.setTitle("mine");

    assertThatThrownBy(mine::store).isInstanceOf(DataChangedException.class);
    assertRow(2, "other writer");
  }

  @Test
  void storeOfAStaleRecordOverwritesAndReusesTheVersionWhenTheSettingIsLeftAtItsDefault() {
    BookRecord mine = fetch(defaults); // executeWithOptimisticLocking defaults to false
    anotherWriterStoresTheBook();
    mine.setTitle("mine");

    mine.store();

    assertRow(2, "mine"); // the other writer's change is lost, and version 2 now means two states
  }

  @Test
  void aDslUpdateNeitherChecksNorBumpsTheVersion() {
    anotherWriterStoresTheBook();

    optimistic.update(BOOKS).set(BOOKS.TITLE, "mine").where(BOOKS.ID.eq(1L)).execute();

    assertRow(2, "mine");
  }

  @Test
  void batchStoreOfAStaleRecordIsDroppedWithoutAnExceptionOnlyARowCountOfZero() {
    BookRecord mine = fetch(optimistic);
    anotherWriterStoresTheBook();
    mine.setTitle("mine");

    int[] counts = optimistic.batchStore(mine).execute();

    assertThat(counts).containsExactly(0); // the caller has to notice this itself
    assertRow(2, "other writer");
  }

  @Test
  void aPojoTurnedBackIntoARecordIsCheckedByUpdateWhenItCarriesTheVersion() {
    Book pojo = fetch(optimistic).into(Book.class);
    anotherWriterStoresTheBook();
    pojo.title = "mine";
    BookRecord mine = optimistic.newRecord(BOOKS, pojo);

    assertThatThrownBy(mine::update).isInstanceOf(DataChangedException.class);
    assertThatThrownBy(mine::store) // a record made by newRecord is new: store() inserts
        .isInstanceOf(IntegrityConstraintViolationException.class);
    assertRow(2, "other writer");
  }

  @Test
  void aPojoWrittenWithExecuteUpdateOverwritesAndTurnsTheVersionBack() {
    Book pojo = fetch(optimistic).into(Book.class);
    anotherWriterStoresTheBook();
    pojo.title = "mine";

    optimistic.executeUpdate(optimistic.newRecord(BOOKS, pojo));

    assertRow(1, "mine"); // a writer still holding version 1 would now pass the check
  }

  @Test
  void reloadingAndCopyingTheChangedFieldsChecksAgainstTheReloadedVersionAndLosesTheUpdate() {
    Book pojo = fetch(optimistic).into(Book.class); // sent to a client in one request...
    anotherWriterStoresTheBook();
    pojo.title = "mine"; // ...and back in the next one
    BookRecord reloaded = fetch(optimistic);
    reloaded.setTitle(pojo.title);

    reloaded.store();

    assertRow(3, "mine");
  }

  @Test
  void theVersionColumnStoreRefusesTheSameStaleWritesAsValuesSingleAndInABatch() {
    VersionColumnStore<Long, String> store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom("books", Long.class, ValueCodec.strings())
                .valueColumn("title")
                .build());
    Versioned<String> mine = store.read(1L).get();
    anotherWriterStoresTheBook();

    Either<Conflict, Versioned<String>> single = store.compareAndSet(1L, mine.version(), "mine");
    List<Either<Conflict, Versioned<String>>> batch =
        store.compareAndSetAll(List.of(VersionedWrite.of(1L, mine.version(), "mine")));

    assertThat(single.getLeft().current()).contains(Version.of(2));
    assertThat(batch.get(0).getLeft().current()).contains(Version.of(2));
    assertRow(2, "other writer");
  }

  /** A POJO as {@code Record.into(Class)} fills it. */
  public static final class Book {
    public Long id;
    public Long version;
    public String title;
  }

  /** What jOOQ's code generator writes for {@code books} with a record version field. */
  static final class Books extends TableImpl<BookRecord> {
    private static final long serialVersionUID = 1L;
    static final Books BOOKS = new Books();

    final TableField<BookRecord, Long> ID =
        createField(DSL.name("id"), SQLDataType.BIGINT.nullable(false), this);
    final TableField<BookRecord, Long> VERSION =
        createField(DSL.name("version"), SQLDataType.BIGINT.nullable(false), this);
    final TableField<BookRecord, String> TITLE =
        createField(DSL.name("title"), SQLDataType.CLOB.nullable(false), this);

    private Books() {
      super(DSL.name("books"));
    }

    @Override
    public Class<BookRecord> getRecordType() {
      return BookRecord.class;
    }

    @Override
    public UniqueKey<BookRecord> getPrimaryKey() {
      return Internal.createUniqueKey(this, DSL.name("books_pkey"), ID);
    }

    @Override
    public TableField<BookRecord, Long> getRecordVersion() {
      return VERSION;
    }
  }

  /** The generated record class, reduced to what the tests use. */
  public static final class BookRecord extends UpdatableRecordImpl<BookRecord> {
    private static final long serialVersionUID = 1L;

    public BookRecord() {
      super(Books.BOOKS);
    }

    void setTitle(String title) {
      set(Books.BOOKS.TITLE, title);
    }
  }
}
