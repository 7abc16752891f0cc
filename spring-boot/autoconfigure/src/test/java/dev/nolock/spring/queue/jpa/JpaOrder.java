package dev.nolock.spring.queue.jpa;

import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;

/** A business row written through JPA in the same transaction as a queue call. */
@Entity
@Table(name = "jpa_orders")
public class JpaOrder {

  @Id private Long id;

  protected JpaOrder() {}

  public JpaOrder(long id) {
    this.id = id;
  }

  public Long getId() {
    return id;
  }
}
