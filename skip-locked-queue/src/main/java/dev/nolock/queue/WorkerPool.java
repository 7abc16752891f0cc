package dev.nolock.queue;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.RenewalScheduler;
import dev.nolock.patterns.sql.NotificationListener;
import dev.nolock.queue.internal.QueueMetrics;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a {@link JobHandler} on the jobs of one {@link JobQueue} with bounded concurrency.
 *
 * <p>Guarantees: at most {@link WorkerConfig#concurrency()} handlers run at once; the pool holds at
 * most {@code max(concurrency, batchSize) + (claimsInFlight - 1) * batchSize} claimed jobs that are
 * waiting or running, and extends their leases every heartbeat interval (a compare-and-swap on each
 * attempt token), plus fewer than twice as many jobs that ran and whose completion waits to be sent
 * (their leases are no longer extended; claims pause while that many wait); a job whose local
 * deadline is nearly over when its turn comes is handed back unrun; {@link #close()} returns within
 * {@link WorkerConfig#shutdownTimeout()} plus one statement per claimed job that had not started
 * (each handed back on its own; up to {@code maxHeld - concurrency} of them, which more claims in
 * flight raise) and the last completions, having let running handlers finish or handed their jobs
 * back.
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>{@link WorkerConfig#claimsInFlight()} dispatcher threads (one by default) each wait until
 *       fewer than {@code concurrency + (claimsInFlight - 1) * batchSize} jobs are held or being
 *       claimed (and fewer than the most held completions wait), then reserve up to {@code
 *       batchSize} of the free places, claim that many jobs in one statement, hand them to the
 *       handler threads and give back the places the claim did not fill. Reserving before the claim
 *       keeps the bound on held jobs with several claims in flight.
 *   <li>When a claim comes back short, the queue is drained: the dispatcher blocks until a
 *       notification for its queue arrives (LISTEN on a held connection, see {@link WakeUp}) or the
 *       poll interval passes. No busy loop: every wait blocks on a condition.
 *   <li>Each handler thread checks the job's deadline, runs the handler, and finishes the attempt
 *       as the returned {@link Completion} says, or fails it when the handler threw, or the writes
 *       of {@link Completion#completeWith} did (rolled back with the completion), recording what
 *       {@link QueueConfig#errorDescriber()} makes of the exception (by default its class names,
 *       never its message). A plain {@link Completion#complete()} is handed to the completer
 *       threads, and the handler thread takes the next job at once; the job stays held until its
 *       completion commits.
 *   <li>Each of {@code claimsInFlight} completer threads sends the completions that are waiting in
 *       one statement ({@link JobQueue#completeAll}: conditional on each attempt, like a single
 *       completion), so jobs that finish while completions are in flight share the next one. A
 *       stale attempt in the batch is refused alone, also when the running attempt of the same job
 *       is in the batch too.
 *   <li>Scheduled tasks, each on a {@link RenewalScheduler} of its own (one daemon thread, a fixed
 *       delay between runs), so a slow VACUUM or reaper never holds a heartbeat up: the heartbeat
 *       (every third of the lease by default), the reaper ({@link JobQueue#reapExpired()}, at start
 *       and every {@link WorkerConfig#reapInterval()}), which wakes the dispatcher when it
 *       re-queued anything, and, when configured, {@link JobQueue#vacuum()}.
 *   <li>{@link #close()}: stop claiming, stop listening, hand back the claimed jobs that have not
 *       started ({@link JobQueue#release}), wait up to the shutdown timeout for running handlers,
 *       then interrupt the rest and hand their jobs back too; then send the completions still
 *       waiting.
 * </ol>
 *
 * Threads are daemons, so a forgotten pool does not keep the JVM alive; call {@link #close()} (for
 * example from a shutdown hook) for a graceful stop. Thread-safe.
 *
 * @param <T> the payload type
 */
public final class WorkerPool<T> implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(WorkerPool.class);

  /** Completions per statement at most; a pool holds few jobs, so this bounds only odd configs. */
  private static final int MAX_COMPLETION_BATCH = 500;

  /**
   * Added once by {@link #close()} after the handlers stopped: a completer that takes it sends the
   * rest it took, puts it back for the others and ends. Nothing is added after it, so no completion
   * waits behind it.
   */
  @SuppressWarnings("rawtypes")
  private static final Held END = new Held<>(null);

  private final JobQueue<T> queue;
  private final WorkerConfig config;
  private final JobHandler<T> handler;
  private final QueueMetrics metrics;
  private final String name;
  private final int maxHeld;
  private final int claimBelow;
  private final Duration startMargin;

  private final Set<Held<T>> held = ConcurrentHashMap.newKeySet();
  private final ThreadPoolExecutor handlers;
  private final RenewalScheduler heartbeats;
  private final RenewalScheduler reaper;
  private final Option<RenewalScheduler> vacuums;
  private final List<Thread> dispatchers = new ArrayList<>();
  private final CountDownLatch warmedUp = new CountDownLatch(1);
  private final List<Thread> completers = new ArrayList<>();
  private final BlockingQueue<Held<T>> toComplete = new LinkedBlockingQueue<>();
  private final AtomicInteger completing = new AtomicInteger();
  private final NotificationListener listener;

  private final ReentrantLock lock = new ReentrantLock();
  private final Condition capacity = lock.newCondition();
  private final Condition work = lock.newCondition();
  private boolean workPending = true;
  private int reserved; // places the claims in flight may fill; guarded by lock

  private final AtomicBoolean closing = new AtomicBoolean();
  private volatile boolean abandoning;
  private volatile WakeUp wakeUp;

  private WorkerPool(JobQueue<T> queue, WorkerConfig config, JobHandler<T> handler) {
    this.queue = Objects.requireNonNull(queue, "queue");
    this.config = Objects.requireNonNull(config, "config");
    this.handler = Objects.requireNonNull(handler, "handler");
    this.metrics = queue.metrics();
    this.name = queue.config().queue();
    this.maxHeld = config.maxHeld();
    this.claimBelow = config.concurrency() + (config.claimsInFlight() - 1) * config.batchSize();
    this.startMargin = queue.config().lease().dividedBy(10);
    this.handlers =
        new ThreadPoolExecutor(
            config.concurrency(),
            config.concurrency(),
            0,
            TimeUnit.MILLISECONDS,
            new LinkedBlockingQueue<>(),
            daemons("worker"));
    // A thread per task: a VACUUM can take seconds, a reaper pass many statements, and neither
    // may hold a heartbeat up.
    this.heartbeats = RenewalScheduler.named(threadName("heartbeat"));
    this.reaper = RenewalScheduler.named(threadName("reaper"));
    this.vacuums =
        config.vacuumInterval().map(every -> RenewalScheduler.named(threadName("vacuum")));
    ThreadFactory dispatcherThreads = daemons("dispatcher");
    for (int i = 0; i < config.claimsInFlight(); i++) {
      boolean first = i == 0;
      dispatchers.add(dispatcherThreads.newThread(() -> dispatch(first)));
    }
    ThreadFactory completerThreads = daemons("completer");
    for (int i = 0; i < config.claimsInFlight(); i++) {
      completers.add(completerThreads.newThread(this::completeInBatches));
    }
    if (config.listen()) {
      this.listener =
          new NotificationListener(
              config.listenDataSource().getOrElse(queue::dataSource),
              DSL.using(queue.dataSource(), SQLDialect.POSTGRES),
              queue.config().channel(),
              "queue \"" + name + "\"",
              "Give WorkerConfig.listenDataSource a direct connection to PostgreSQL to get"
                  + " wake-ups within milliseconds.",
              config.pollInterval(),
              config.selfTestTimeout(),
              new NotificationListener.Receiver() {
                @Override
                public void listening() {
                  wake(); // jobs may have arrived before the LISTEN
                }

                @Override
                public void received(List<String> payloads) {
                  if (payloads.contains(name)) {
                    wake();
                  }
                }
              },
              () -> true,
              state -> wakeUp = WakeUp.valueOf(state.name()));
    } else {
      this.listener = null;
      this.wakeUp = WakeUp.POLLING;
    }
  }

  /** Starts a pool that runs {@code handler} on the jobs of {@code queue}. */
  public static <T> WorkerPool<T> start(
      JobQueue<T> queue, WorkerConfig config, JobHandler<T> handler) {
    WorkerPool<T> pool = new WorkerPool<>(queue, config, handler);
    pool.begin();
    return pool;
  }

  private void begin() {
    if (listener != null) {
      listener.start();
    }
    Duration heartbeat = config.heartbeatInterval().getOrElse(queue.config().lease().dividedBy(3));
    heartbeats.repeat(this::heartbeat, heartbeat);
    reaper.once(this::reap, Duration.ZERO);
    reaper.repeat(this::reap, config.reapInterval());
    vacuums.forEach(v -> v.repeat(this::vacuum, config.vacuumInterval().get()));
    completers.forEach(Thread::start);
    dispatchers.forEach(Thread::start);
    LOG.info("Queue \"{}\": worker pool started with {}", name, config);
  }

  /** How the pool learns about new jobs right now. */
  public WakeUp wakeUp() {
    return wakeUp;
  }

  /**
   * Jobs the pool holds now: claimed and waiting for a thread, or running. Jobs that ran and whose
   * completion waits for the completer are not counted.
   */
  public int held() {
    return held.size();
  }

  /** True until {@link #close()} is called. */
  public boolean isRunning() {
    return !closing.get();
  }

  // -----------------------------------------------------------------------------------------------
  // Dispatcher

  private void dispatch(boolean first) {
    if (first) {
      try {
        queue.warmUp(); // before the first claim, so it does not eat the first batch's leases
      } catch (RuntimeException e) {
        LOG.debug("Queue \"{}\": warming up failed", name, e);
      } finally {
        warmedUp.countDown();
      }
    } else {
      try {
        warmedUp.await();
      } catch (InterruptedException e) {
        return;
      }
    }
    while (!closing.get()) {
      int want;
      lock.lock();
      try {
        while (!closing.get()
            && (held.size() + reserved >= claimBelow || completing.get() >= maxHeld)) {
          capacity.await();
        }
        if (closing.get()) {
          return;
        }
        want = Math.min(config.batchSize(), maxHeld - held.size() - reserved);
        reserved += want;
        workPending = false;
      } catch (InterruptedException e) {
        return;
      } finally {
        lock.unlock();
      }
      List<Job<T>> claimed = List.of();
      try {
        claimed = queue.claim(want);
        for (Job<T> job : claimed) {
          Held<T> h = new Held<>(job);
          // Before the reservation goes, so held never exceeds maxHeld (counted twice for a
          // moment, which only makes the other dispatchers wait).
          held.add(h);
          try {
            handlers.execute(new RunJob(h));
          } catch (RejectedExecutionException e) {
            // close() gave up waiting for this claim and shut the handlers down: hand it back.
            if (h.finishing.compareAndSet(false, true)) {
              releaseQuietly(h);
            }
            freed(h);
          }
        }
      } catch (BackendUnavailableException e) {
        LOG.warn("Queue \"{}\": claim failed; trying again in {}", name, config.pollInterval(), e);
      } catch (RuntimeException | LinkageError | AssertionError e) {
        // Not the server's: a bug, a codec or a class that failed. The dispatcher carries on, so
        // one bad claim does not silently take a dispatcher, and its places, away for good.
        LOG.error(
            "Queue \"{}\": claim failed unexpectedly; trying again in {}",
            name,
            config.pollInterval(),
            e);
      } finally {
        unreserve(want); // on every path, an Error too: a leaked reservation starves the pool
      }
      if (claimed.size() < want) {
        awaitWork();
      }
    }
  }

  private void unreserve(int places) {
    lock.lock();
    try {
      reserved -= places;
      capacity.signalAll();
    } finally {
      lock.unlock();
    }
  }

  private void awaitWork() {
    lock.lock();
    try {
      if (!workPending && !closing.get()) {
        work.awaitNanos(config.pollInterval().toNanos());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      lock.unlock();
    }
  }

  private void wake() {
    lock.lock();
    try {
      workPending = true;
      work.signalAll();
    } finally {
      lock.unlock();
    }
  }

  private void freed(Held<T> h) {
    held.remove(h);
    signalCapacity();
  }

  private void signalCapacity() {
    lock.lock();
    try {
      capacity.signalAll();
    } finally {
      lock.unlock();
    }
  }

  // -----------------------------------------------------------------------------------------------
  // Handler threads

  private final class RunJob implements Runnable {
    private final Held<T> h;

    RunJob(Held<T> h) {
      this.h = h;
    }

    @Override
    public void run() {
      boolean handedToCompleter = false;
      try {
        handedToCompleter = runJob();
      } catch (BackendUnavailableException e) {
        LOG.warn(
            "Queue \"{}\": finishing job {} attempt {} failed and its outcome is unknown; if it"
                + " was not finished, the job may run again after its lease expires",
            name,
            h.job.id(),
            h.job.attempt(),
            e);
      } catch (RuntimeException e) {
        LOG.error(
            "Queue \"{}\": job {} attempt {} could not be finished",
            name,
            h.job.id(),
            h.job.attempt(),
            e);
      } finally {
        if (handedToCompleter) {
          freed(h); // the thread and the slot are free; the completer finishes the job
        } else {
          done(h);
        }
      }
    }

    /** Runs the job and finishes it; true when its completion was handed to the completer. */
    private boolean runJob() {
      Job<T> job = h.job;
      if (closing.get() || job.deadline().remaining().compareTo(startMargin) <= 0) {
        if (!closing.get()) {
          metrics.coordination().leaseLost();
          LOG.warn(
              "Queue \"{}\": job {} attempt {} has less than a tenth of its lease left"
                  + " when its turn comes (the process was paused or starved, or batchSize is too"
                  + " large for the concurrency); handing it back unrun",
              name,
              job.id(),
              job.attempt());
        }
        if (h.finishing.compareAndSet(false, true)) {
          queue.release(job);
        }
        return false;
      }
      long started = System.nanoTime();
      Completion completion = null;
      Throwable failure = null;
      try {
        completion = handler.handle(job);
        if (completion == null) {
          failure = new HandlerReturnedNull();
        }
      } catch (Throwable t) { // every failure of the job's code fails the attempt
        failure = t;
      }
      metrics.jobRan(Duration.ofNanos(System.nanoTime() - started));
      if (!h.finishing.compareAndSet(false, true)) {
        return false; // close() handed the job back already; this attempt's finish would be refused
      }
      if (failure != null) {
        failed(job, failure);
        return false;
      }
      Completion done = completion;
      switch (done.kind()) {
        case COMPLETE -> {
          completing.incrementAndGet();
          toComplete.add(h);
          return true;
        }
        case COMPLETE_WITH -> {
          Throwable writesFailure = completeWith(job, done.writes());
          if (writesFailure != null) {
            failed(job, writesFailure); // the writes are the job's code, as the handler is
          }
        }
        case FINISHED_BY_HANDLER -> {}
        default -> throw new IllegalStateException("Unknown completion " + done);
      }
      return false;
    }

    /**
     * Completes the job with {@code writes}; returns what the writes threw (the completion rolled
     * back with them), or null. A failure of the queue's own, such as an unknown outcome, is
     * thrown.
     */
    private Throwable completeWith(Job<T> job, Completion.Writes writes) {
      // Told apart by identity: the queue rethrows the writes' exception, the same instance.
      Throwable[] writesThrew = new Throwable[1];
      try {
        queue
            .completeWith(
                job,
                tx -> {
                  try {
                    writes.write(tx);
                  } catch (Throwable t) {
                    writesThrew[0] = t;
                    throw t;
                  }
                  return Boolean.TRUE;
                })
            .peekLeft(stale -> LOG.info("Queue \"{}\": {}", name, stale.describe()));
        return null;
      } catch (RuntimeException | Error e) {
        if (e != writesThrew[0]) {
          throw e;
        }
        return e;
      } catch (Exception e) {
        if (e != writesThrew[0]) {
          // Not the writes': the queue's own failure, which must never fail the attempt.
          throw new IllegalStateException(
              "Completing job " + job.id() + " attempt " + job.attempt() + " failed", e);
        }
        return e;
      }
    }

    /** Fails the attempt whose code threw, or hands it back when close() interrupted that code. */
    private void failed(Job<T> job, Throwable failure) {
      if (closing.get() && (abandoning || failure instanceof InterruptedException)) {
        queue.release(job); // interrupted by close() past its timeout: hand the job back
        return;
      }
      // The describer's text, not the exception: its message, printed with a stack trace too,
      // carries the payload data the handler was working on.
      String error = ErrorDescriber.describe(queue.config().errorDescriber(), failure);
      LOG.debug("Queue \"{}\": job {} attempt {} failed: {}", name, job.id(), job.attempt(), error);
      queue
          .fail(job, error)
          .peekLeft(stale -> LOG.info("Queue \"{}\": {}", name, stale.describe()));
    }
  }

  /** A held job is finished: it no longer counts against the pool's capacity. */
  private void done(Held<T> h) {
    metrics.coordination().held(Duration.ofNanos(System.nanoTime() - h.claimedAt));
    freed(h);
  }

  // -----------------------------------------------------------------------------------------------
  // Completer

  /**
   * Sends the waiting completions, all of them in one statement, until {@link #close()} adds the
   * end marker. Batching is a by-product of the round trip: while one statement is in flight the
   * next completions queue up, so a busy pool sends fewer, larger statements and an idle one sends
   * each completion at once.
   */
  private void completeInBatches() {
    List<Held<T>> batch = new ArrayList<>();
    while (true) {
      try {
        batch.add(toComplete.take());
      } catch (InterruptedException e) {
        return; // close() gave up waiting; the jobs left run again after their leases
      }
      toComplete.drainTo(batch, MAX_COMPLETION_BATCH - 1);
      boolean end = batch.remove(END);
      if (end) {
        toComplete.add(endMarker()); // put back at once: the other completers end on it too
      }
      if (!batch.isEmpty()) {
        completeAll(batch);
      }
      batch.clear();
      if (end) {
        return;
      }
    }
  }

  @SuppressWarnings("unchecked")
  private Held<T> endMarker() {
    return END;
  }

  private void completeAll(List<Held<T>> batch) {
    List<Job<T>> jobs = new ArrayList<>(batch.size());
    batch.forEach(h -> jobs.add(h.job));
    try {
      queue
          .completeAll(jobs)
          .forEach(
              answer ->
                  answer.peekLeft(stale -> LOG.info("Queue \"{}\": {}", name, stale.describe())));
    } catch (BackendUnavailableException e) {
      LOG.warn(
          "Queue \"{}\": completing {} job(s) failed and the outcome is unknown; those not"
              + " completed may run again after their leases expire",
          name,
          batch.size(),
          e);
    } catch (RuntimeException e) {
      LOG.error("Queue \"{}\": {} job(s) could not be completed", name, batch.size(), e);
    } finally {
      long now = System.nanoTime();
      batch.forEach(h -> metrics.coordination().held(Duration.ofNanos(now - h.claimedAt)));
      completing.addAndGet(-batch.size());
      signalCapacity();
    }
  }

  // -----------------------------------------------------------------------------------------------
  // Maintenance

  private void heartbeat() {
    try {
      List<Held<T>> beating = new ArrayList<>();
      List<Job<T>> jobs = new ArrayList<>();
      for (Held<T> h : held) {
        if (!h.finishing.get()) {
          beating.add(h);
          jobs.add(h.job);
        }
      }
      if (jobs.isEmpty()) {
        return;
      }
      // One answer per attempt: the pool may hold two attempts of one job (it was paused past a
      // lease, its own reaper re-queued the job and its dispatcher claimed it again).
      List<Option<Job<T>>> extended = queue.heartbeatAll(jobs);
      for (int i = 0; i < beating.size(); i++) {
        Held<T> h = beating.get(i);
        Option<Job<T>> renewed = extended.get(i);
        if (renewed.isDefined()) {
          h.job = renewed.get();
          metrics.coordination().renewed();
        } else if (held.contains(h) && !h.finishing.get()) {
          // Stale, expired, or locked at that instant. The job's deadline decides from here:
          // unstarted, it is handed back once too little lease is left; running, its finish is
          // refused if someone else has re-claimed it meanwhile.
          metrics.coordination().renewalFailed();
          LOG.debug(
              "Queue \"{}\": the lease of job {} attempt {} was not extended",
              name,
              h.job.id(),
              h.job.attempt());
        }
      }
    } catch (RuntimeException e) {
      LOG.warn("Queue \"{}\": heartbeat failed; leases run down to their deadlines", name, e);
    }
  }

  private void reap() {
    try {
      if (queue.reapExpired().requeued() > 0) {
        wake();
      }
    } catch (RuntimeException e) {
      LOG.warn("Queue \"{}\": reaper failed; trying again in {}", name, config.reapInterval(), e);
    }
  }

  private void vacuum() {
    try {
      queue.vacuum();
    } catch (RuntimeException e) {
      LOG.warn(
          "Queue \"{}\": vacuum failed; trying again in {}",
          name,
          config.vacuumInterval().get(),
          e);
    }
  }

  // -----------------------------------------------------------------------------------------------
  // Shutdown

  /**
   * Stops the pool: no new claims; claimed jobs that have not started are handed back; running
   * handlers get up to {@link WorkerConfig#shutdownTimeout()} to finish, then are interrupted and
   * their jobs handed back (a handler that ignores the interrupt keeps running, but its finish is
   * not sent, and the job may run elsewhere); last, the completions still waiting are sent.
   * Idempotent.
   */
  @Override
  public void close() {
    if (!closing.compareAndSet(false, true)) {
      return;
    }
    wake();
    lock.lock();
    try {
      capacity.signalAll();
    } finally {
      lock.unlock();
    }
    if (listener != null) {
      listener.close();
    }
    try {
      long joinBy = System.nanoTime() + queue.config().queryTimeout().plusSeconds(1).toNanos();
      for (Thread dispatcher : dispatchers) {
        TimeUnit.NANOSECONDS.timedJoin(dispatcher, Math.max(1, joinBy - System.nanoTime()));
      }
      List<Runnable> unstarted = new ArrayList<>();
      handlers.getQueue().drainTo(unstarted);
      for (Runnable r : unstarted) {
        @SuppressWarnings(
            "unchecked") // every queued task is this pool's RunJob: its Held is a Held<T>
        Held<T> h = ((RunJob) r).h;
        if (h.finishing.compareAndSet(false, true)) {
          releaseQuietly(h);
        }
        freed(h);
      }
      handlers.shutdown();
      if (!handlers.awaitTermination(config.shutdownTimeout().toNanos(), TimeUnit.NANOSECONDS)) {
        abandoning = true;
        handlers.shutdownNow();
        for (Held<T> h : held) {
          if (h.finishing.compareAndSet(false, true)) {
            releaseQuietly(h);
          }
        }
        handlers.awaitTermination(1, TimeUnit.SECONDS);
      }
      endCompleters();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      completers.forEach(Thread::interrupt);
      LOG.warn(
          "Queue \"{}\": close() was interrupted; {} held job(s) and {} waiting completion(s) are"
              + " left to their leases: they run again after their leases expire, and a handler"
              + " still running may overlap that run",
          name,
          held.size(),
          pendingCompletions());
    } finally {
      heartbeats.close();
      reaper.close();
      vacuums.forEach(RenewalScheduler::close);
      LOG.info("Queue \"{}\": worker pool stopped", name);
    }
  }

  @SuppressWarnings("unchecked")
  private void endCompleters() throws InterruptedException {
    toComplete.add(END); // each completer that takes it puts it back, so it reaches them all
    long joinBy = System.nanoTime() + queue.config().queryTimeout().plusSeconds(1).toNanos();
    boolean late = false;
    for (Thread completer : completers) {
      TimeUnit.NANOSECONDS.timedJoin(completer, Math.max(1, joinBy - System.nanoTime()));
      if (completer.isAlive()) {
        late = true;
        completer.interrupt();
      }
    }
    if (late) {
      LOG.warn(
          "Queue \"{}\": the last completions did not commit in time; those jobs run again after"
              + " their leases expire",
          name);
    }
    int left = pendingCompletions();
    if (left > 0) {
      // A handler that ignored its interrupt finished after the completers ended.
      LOG.warn(
          "Queue \"{}\": {} completion(s) arrived after the completers ended and were not sent;"
              + " those jobs run again after their leases expire",
          name,
          left);
    }
  }

  private int pendingCompletions() {
    int pending = 0;
    for (Held<T> h : toComplete) {
      if (h != END) {
        pending++;
      }
    }
    return pending;
  }

  private void releaseQuietly(Held<T> h) {
    try {
      queue.release(h.job);
    } catch (RuntimeException e) {
      LOG.warn(
          "Queue \"{}\": could not hand job {} back; the reaper takes it back when its lease"
              + " expires",
          name,
          h.job.id(),
          e);
    }
  }

  private String threadName(String role) {
    return "nolock-queue-" + name + "-" + role;
  }

  private ThreadFactory daemons(String role) {
    AtomicInteger count = new AtomicInteger();
    return runnable -> {
      Thread t = new Thread(runnable, threadName(role) + "-" + count.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  @Override
  public String toString() {
    return "WorkerPool[queue=" + name + ", " + config + ", wakeUp=" + wakeUp + "]";
  }

  /**
   * The handler returned null instead of a {@link Completion}. A class of its own, so that its name
   * alone, which is what {@code last_error} keeps by default, says what went wrong.
   */
  private static final class HandlerReturnedNull extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    HandlerReturnedNull() {
      super("The handler returned null; return Completion.complete() (or another Completion)");
    }
  }

  /** A claimed job as the pool tracks it. Identity matters: a job id may come back re-claimed. */
  private static final class Held<T> {
    final long claimedAt = System.nanoTime();
    volatile Job<T> job;

    /** Set by whoever finishes the attempt first: its handler, or close() handing it back. */
    final AtomicBoolean finishing = new AtomicBoolean();

    Held(Job<T> job) {
      this.job = job;
    }
  }
}
