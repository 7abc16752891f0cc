package dev.nolock.testkit.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class JdbcUrlsTest {

  @Test
  void setParameterReplacesAnEarlierValueInsteadOfAddingASecond() {
    String url = "jdbc:postgresql://h:5432/db?user=u&currentSchema=public&ssl=false";

    assertThat(JdbcUrls.withParameter(url, "currentSchema", "nolock_t_0123456789ab"))
        .isEqualTo(
            "jdbc:postgresql://h:5432/db?user=u&ssl=false&currentSchema=nolock_t_0123456789ab");
    assertThat(JdbcUrls.withParameter("jdbc:postgresql://h/db", "prepareThreshold", "0"))
        .isEqualTo("jdbc:postgresql://h/db?prepareThreshold=0");
  }

  @Test
  void parameterReadsTheLastValue() {
    assertThat(JdbcUrls.parameter("jdbc:postgresql://h/db?a=1&b=2&a=3", "a")).contains("3");
    assertThat(JdbcUrls.parameter("jdbc:postgresql://h/db", "a")).isEmpty();
  }
}
